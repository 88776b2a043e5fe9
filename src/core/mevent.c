#include "core/mevent.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct mevent_loop {
	int epfd;
	volatile bool stop;
};

struct mevent {
	struct mevent_loop *loop;
	int fd;
	uint32_t events;
	mevent_cb_t cb;
	void *arg;
};

struct mevent_loop *mevent_loop_create(void)
{
	struct mevent_loop *loop = calloc(1, sizeof(*loop));

	if (loop == NULL)
		return NULL;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		free(loop);
		return NULL;
	}
	return loop;
}

void mevent_loop_free(struct mevent_loop *loop)
{
	if (loop == NULL)
		return;
	close(loop->epfd);
	free(loop);
}

struct mevent *mevent_add(struct mevent_loop *loop, int fd, uint32_t events, mevent_cb_t cb,
			  void *arg)
{
	struct mevent *ev = calloc(1, sizeof(*ev));
	struct epoll_event ee = {.events = events};

	if (ev == NULL)
		return NULL;
	*ev = (struct mevent){loop, fd, events, cb, arg};
	ee.data.ptr = ev;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ee) < 0) {
		free(ev);
		return NULL;
	}
	return ev;
}

void mevent_delete(struct mevent *ev)
{
	if (ev == NULL)
		return;
	epoll_ctl(ev->loop->epfd, EPOLL_CTL_DEL, ev->fd, NULL);
	free(ev);
}

int mevent_enable(struct mevent *ev, bool enabled)
{
	struct epoll_event ee = {.events = enabled ? ev->events : 0, .data.ptr = ev};

	return epoll_ctl(ev->loop->epfd, EPOLL_CTL_MOD, ev->fd, &ee);
}

int mevent_loop_run(struct mevent_loop *loop)
{
	struct epoll_event ee[16];

	while (!loop->stop) {
		int n = epoll_wait(loop->epfd, ee, 16, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		for (int i = 0; i < n && !loop->stop; i++) {
			struct mevent *ev = ee[i].data.ptr;

			ev->cb(ev->fd, ee[i].events, ev->arg);
		}
	}
	return 0;
}

void mevent_loop_stop(struct mevent_loop *loop)
{
	loop->stop = true;
}
