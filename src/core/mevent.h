/*
 * The main thread's event loop (bhyve calls it mevent): file descriptors
 * with callbacks, on epoll.  Back ends (serial input, sockets, signals) live
 * here; vCPU threads never block in it.
 */
#ifndef KHYVE_MEVENT_H
#define KHYVE_MEVENT_H

#include <stdbool.h>
#include <stdint.h>

struct mevent_loop;
struct mevent;

/* Called on the loop thread when `fd` is ready; `events` are EPOLL* bits. */
typedef void (*mevent_cb_t)(int fd, uint32_t events, void *arg);

/* Create / free a loop (freeing also frees every event still on it).
 * NULL on failure (errno set). */
struct mevent_loop *mevent_loop_create(void);
void mevent_loop_free(struct mevent_loop *loop);

/*
 * Watch `fd` for `events` (EPOLLIN, EPOLLOUT...).  The fd stays owned by the
 * caller.  Returns NULL on failure.  May be called from any thread.
 */
struct mevent *mevent_add(struct mevent_loop *loop, int fd, uint32_t events, mevent_cb_t cb,
                          void *arg);

/* Stop watching and free `ev`.  Only on the loop thread from `ev`'s own
 * callback, or when the loop is not running. */
void mevent_delete(struct mevent *ev);

/* Pause or resume delivery for `ev` without removing it; thread-safe. */
int mevent_enable(struct mevent *ev, bool enabled);

/* Watch for `events` from now on (0: none; epoll reports errors and
 * hang-ups regardless); mevent_enable(ev, true) restores them later.
 * Thread-safe; callers changing one event from several threads serialise
 * the calls themselves.  0, or -1 with errno from epoll_ctl. */
int mevent_set_events(struct mevent *ev, uint32_t events);

/* Run callbacks until mevent_loop_stop().  Returns 0, or -1 on epoll error. */
int mevent_loop_run(struct mevent_loop *loop);

/* Make mevent_loop_run() return after the current callback.  Call it from a
 * callback (other threads wake the loop through an fd they write). */
void mevent_loop_stop(struct mevent_loop *loop);

#endif
