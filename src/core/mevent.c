#include "core/mevent.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

struct mevent;

struct mevent_loop {
	int epfd;
	volatile bool stop;
	pthread_mutex_t lock; /* guards the list of events */
	struct mevent *events;
};

struct mevent {
	struct mevent_loop *loop;
	int fd;
	uint32_t events;
	mevent_cb_t cb;
	void *arg;
	struct mevent *next, *prev;
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
	pthread_mutex_init(&loop->lock, NULL);
	return loop;
}

void mevent_loop_free(struct mevent_loop *loop)
{
	if (loop == NULL)
		return;
	while (loop->events != NULL) {
		struct mevent *ev = loop->events;

		loop->events = ev->next;
		free(ev);
	}
	close(loop->epfd);
	pthread_mutex_destroy(&loop->lock);
	free(loop);
}

struct mevent *mevent_add(struct mevent_loop *loop, int fd, uint32_t events, mevent_cb_t cb,
                          void *arg)
{
	struct mevent *ev = calloc(1, sizeof(*ev));
	struct epoll_event ee = {.events = events};

	if (ev == NULL)
		return NULL;
	*ev = (struct mevent){loop, fd, events, cb, arg, NULL, NULL};
	ee.data.ptr = ev;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ee) < 0) {
		free(ev);
		return NULL;
	}
	pthread_mutex_lock(&loop->lock);
	ev->next = loop->events;
	if (loop->events != NULL)
		loop->events->prev = ev;
	loop->events = ev;
	pthread_mutex_unlock(&loop->lock);
	return ev;
}

void mevent_delete(struct mevent *ev)
{
	struct mevent_loop *loop;

	if (ev == NULL)
		return;
	loop = ev->loop;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, ev->fd, NULL);
	pthread_mutex_lock(&loop->lock);
	if (ev->prev != NULL)
		ev->prev->next = ev->next;
	else
		loop->events = ev->next;
	if (ev->next != NULL)
		ev->next->prev = ev->prev;
	pthread_mutex_unlock(&loop->lock);
	free(ev);
}

int mevent_enable(struct mevent *ev, bool enabled)
{
	struct epoll_event ee = {.events = enabled ? ev->events : 0, .data.ptr = ev};

	return epoll_ctl(ev->loop->epfd, EPOLL_CTL_MOD, ev->fd, &ee);
}

int mevent_set_events(struct mevent *ev, uint32_t events)
{
	struct epoll_event ee = {.events = events, .data.ptr = ev};

	ev->events = events;
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
