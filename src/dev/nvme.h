/*
 * NVMe queue entry layouts shared by the controller model (dev/nvme.c),
 * its unit tests and bench/nvme_harness.c (NVM Express Base Specification
 * 2.0; little-endian, as the guest writes them).
 */
#ifndef KHYVE_NVME_H
#define KHYVE_NVME_H

#include <stdint.h>

#define NVME_SQE_SIZE 64 /* bytes per submission queue entry */
#define NVME_CQE_SIZE 16 /* bytes per completion queue entry */

/* A submission queue entry (section 4.2), copied out of guest memory. */
struct nvme_sqe {
	uint8_t opc;
	uint8_t flags; /* FUSE 1:0, PSDT 7:6 */
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2, cdw3;
	uint64_t mptr;
	uint64_t prp1, prp2;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

/* A completion queue entry (section 4.6). */
struct nvme_cqe {
	uint32_t dw0;
	uint32_t dw1;
	uint16_t sqhd;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status; /* bit 0: phase tag */
};

/* One Dataset Management range (NVM Command Set section 3.2.3). */
struct nvme_dsm_range {
	uint32_t attributes;
	uint32_t nlb;
	uint64_t slba;
};

_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE is 64 bytes");
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE is 16 bytes");
_Static_assert(sizeof(struct nvme_dsm_range) == 16, "DSM range is 16 bytes");

#endif
