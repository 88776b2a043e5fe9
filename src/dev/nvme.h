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

/* An Error Information log entry (section 5.16.1.2); error_count 0 marks
 * an unused entry. */
struct nvme_error_entry {
	uint64_t error_count;
	uint16_t sqid; /* 0xffff: not tied to a submission queue */
	uint16_t cid;  /* 0xffff: not tied to a command */
	uint16_t status;
	uint16_t param_loc; /* 0xffff: no parameter at fault */
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs, trtype;
	uint8_t rsvd30[2];
	uint64_t csi;
	uint16_t ttsi;
	uint8_t rsvd42[22];
};

/* Asynchronous Event Request completion dword 0 (section 5.2.1): event
 * type, event information, and the log page that clears the event. */
#define NVME_AE_DW0(type, info, lid)                                                               \
	((uint32_t)(type) | (uint32_t)(info) << 8 | (uint32_t)(lid) << 16)
#define NVME_AE_ERROR             0    /* type: error status */
#define NVME_AE_SMART             1    /* type: SMART / health status */
#define NVME_AEI_INVALID_DB_REG   0x00 /* error: write to an invalid doorbell register */
#define NVME_AEI_INVALID_DB_VALUE 0x01 /* error: invalid doorbell write value */
#define NVME_AEI_TEMPERATURE      0x01 /* SMART: temperature threshold */

/* One Dataset Management range (NVM Command Set section 3.2.3). */
struct nvme_dsm_range {
	uint32_t attributes;
	uint32_t nlb;
	uint64_t slba;
};

_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE is 64 bytes");
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE is 16 bytes");
_Static_assert(sizeof(struct nvme_dsm_range) == 16, "DSM range is 16 bytes");
_Static_assert(sizeof(struct nvme_error_entry) == 64, "error log entry is 64 bytes");

#endif
