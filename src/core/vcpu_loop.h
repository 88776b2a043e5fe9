/* The vCPU threads: KVM_RUN in a loop, exits dispatched to the buses. */
#ifndef KHYVE_VCPU_LOOP_H
#define KHYVE_VCPU_LOOP_H

struct machine;

/* Start one thread per vCPU; 0, or -1 (threads already started keep
 * running until machine_request_exit()). */
int vcpu_threads_start(struct machine *m);

/* Wait for every started vCPU thread to finish. */
void vcpu_threads_join(struct machine *m);

#endif
