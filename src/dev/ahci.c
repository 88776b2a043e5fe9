/*
 * AHCI host bus adapter (Serial ATA AHCI 1.3.1) with SATA disks (ATA8-ACS)
 * and ATAPI CD-ROMs (MMC-6/SPC-4), after bhyve's pci_ahci:
 *
 *   -s slot,ahci,hd:PATH[,opts],cd:PATH[,opts]...   (up to 32 ports)
 *   -s slot,ahci-hd,PATH[,opts]    -s slot,ahci-cd,PATH[,opts]   (one port)
 *
 * A CD port without a path ("cd:", or ahci-cd with none) starts with an
 * empty tray.  Each CD port is a removable-medium drive of the machine
 * (cdN, core/machine.h): the API changes its medium (cd_change()), the
 * guest sees the change as MMC-6 says (UNIT ATTENTION, media events).
 *
 * Config keys: pci.B.S.F.port.N.type (hd|cd), .path, the block options of
 * backend/blockif.h (ro, nocache, sync, direct, nodelete, sectorsize) and
 * per port nmrr= (IDENTIFY word 217: 1 = solid state, else rpm), ser=
 * (serial, 20 chars), rev= (firmware revision, 8), model= (40).
 *
 * The ABAR is BAR 5 (32-bit MMIO): the generic host control registers at
 * 0x00 and one 0x80-byte register block per port from 0x100 (AHCI 3.1,
 * 3.3).  Interrupts go out as one MSI message, or INTx when MSI is off.
 *
 * Commands run synchronously in the vCPU thread that writes PxCI (each
 * port has its own blockif context, used under the HBA lock): a command's
 * data is in the image and its status in PxTFD and the received-FIS area
 * when that write returns.  Every guest-physical address (command list,
 * received-FIS area, command tables, PRDT entries) goes through
 * gmem_ptr(); a bad one stops the port with PxIS.HBFS, a malformed command
 * with PxIS.TFES and ERR/ABRT in PxTFD (AHCI 6.1), never a crash.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "backend/blockif.h"
#include "bus/pci.h"
#include "core/machine.h"
#include "lib/config.h"
#include "lib/devopts.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "lib/sbuf.h"
#include "vmm/mem.h"

#define AHCI_MAX_PORTS  32
#define AHCI_MAX_SLOTS  32
#define AHCI_BAR        5
#define AHCI_PORT_BASE  0x100
#define AHCI_PORT_SIZE  0x80
#define AHCI_BAR_SIZE   (AHCI_PORT_BASE + AHCI_MAX_PORTS * AHCI_PORT_SIZE)
#define AHCI_MAX_PRDT   1024 /* entries per command (IOV_MAX for preadv) */
#define AHCI_DSM_BLOCKS 8    /* 512-byte blocks of TRIM ranges per command */
#define ATAPI_SECTOR    2048

/* Generic host control (AHCI 3.1). */
#define HBA_CAP      0x00
#define HBA_GHC      0x04
#define HBA_IS       0x08
#define HBA_PI       0x0c
#define HBA_VS       0x10
#define HBA_CAP2     0x24

#define CAP_S64A     (1u << 31)
#define CAP_SNCQ     (1u << 30)
#define CAP_SCLO     (1u << 24)
#define CAP_ISS_GEN3 (3u << 20)
#define CAP_SAM      (1u << 18)
#define GHC_AE       (1u << 31)
#define GHC_IE       (1u << 1)
#define GHC_HR       (1u << 0)
#define AHCI_VERSION 0x00010301 /* 1.3.1 */

/* Port registers (AHCI 3.3). */
#define PX_CLB  0x00
#define PX_CLBU 0x04
#define PX_FB   0x08
#define PX_FBU  0x0c
#define PX_IS   0x10
#define PX_IE   0x14
#define PX_CMD  0x18
#define PX_TFD  0x20
#define PX_SIG  0x24
#define PX_SSTS 0x28
#define PX_SCTL 0x2c
#define PX_SERR 0x30
#define PX_SACT 0x34
#define PX_CI   0x38
#define PX_SNTF 0x3c

/* PxIS / PxIE bits. */
#define PIS_DHRS (1u << 0)
#define PIS_PSS  (1u << 1)
#define PIS_SDBS (1u << 3)
#define PIS_OFS  (1u << 24)
#define PIS_HBFS (1u << 29)
#define PIS_TFES (1u << 30)
#define PIE_MASK 0xfdc000ffu

/* PxCMD bits. */
#define PCMD_ST        (1u << 0)
#define PCMD_SUD       (1u << 1)
#define PCMD_POD       (1u << 2)
#define PCMD_CLO       (1u << 3)
#define PCMD_FRE       (1u << 4)
#define PCMD_CCS_SHIFT 8
#define PCMD_CCS_MASK  (0x1fu << 8)
#define PCMD_FR        (1u << 14)
#define PCMD_CR        (1u << 15)
#define PCMD_ATAPI     (1u << 24)
/* Bits software may write (ST, CLO, FRE, PMA, APSTE, ATAPI, DLAE, ALPE, ASP). */
#define PCMD_WRITABLE 0x0f82001du

/* ATA status and error bits (ATA8-ACS 6.1). */
#define ATA_S_ERR   0x01
#define ATA_S_DRQ   0x08
#define ATA_S_DSC   0x10
#define ATA_S_DRDY  0x40
#define ATA_S_BSY   0x80
#define ATA_E_ABRT  0x04
#define ATA_E_IDNF  0x10
#define ATA_E_UNC   0x40
#define STATUS_OK   (ATA_S_DRDY | ATA_S_DSC)

#define SIG_ATA     0x00000101u
#define SIG_ATAPI   0xeb140101u
#define SSTS_ONLINE 0x133u /* DET 3 (device, phy up), SPD gen 3, IPM active */

/* FIS types and received-FIS area offsets (AHCI 4.2.1). */
#define FIS_H2D   0x27
#define FIS_D2H   0x34
#define FIS_SDB   0xa1
#define FIS_PIO   0x5f
#define RFIS_PIO  0x20
#define RFIS_D2H  0x40
#define RFIS_SDB  0x58
#define RFIS_SIZE 0x100

/* Command table layout (AHCI 4.2.3). */
#define CT_ACMD      0x40
#define CT_PRDT      0x80
#define PRD_SIZE     16
#define CMD_HDR_SIZE 32

/* ATA commands (ATA8-ACS 7). */
#define ATA_NOP             0x00
#define ATA_DSM             0x06
#define ATA_DEVICE_RESET    0x08
#define ATA_READ_PIO        0x20
#define ATA_READ_PIO_EXT    0x24
#define ATA_READ_DMA_EXT    0x25
#define ATA_WRITE_PIO       0x30
#define ATA_WRITE_PIO_EXT   0x34
#define ATA_WRITE_DMA_EXT   0x35
#define ATA_READ_VERIFY     0x40
#define ATA_READ_VERIFY_EXT 0x42
#define ATA_READ_FPDMA      0x60
#define ATA_WRITE_FPDMA     0x61
#define ATA_EXEC_DIAG       0x90
#define ATA_INIT_PARAMS     0x91
#define ATA_PACKET          0xa0
#define ATA_IDENTIFY_PACKET 0xa1
#define ATA_SET_MULTIPLE    0xc6
#define ATA_READ_DMA        0xc8
#define ATA_WRITE_DMA       0xca
#define ATA_STANDBY_IMM     0xe0
#define ATA_IDLE_IMM        0xe1
#define ATA_STANDBY         0xe2
#define ATA_IDLE            0xe3
#define ATA_CHECK_POWER     0xe5
#define ATA_FLUSH           0xe7
#define ATA_FLUSH_EXT       0xea
#define ATA_IDENTIFY        0xec
#define ATA_SET_FEATURES    0xef

/* SCSI/MMC operation codes and sense data (SPC-4, MMC-6). */
#define SCSI_TEST_UNIT_READY 0x00
#define SCSI_REQUEST_SENSE   0x03
#define SCSI_INQUIRY         0x12
#define SCSI_START_STOP      0x1b
#define SCSI_PREVENT_ALLOW   0x1e
#define SCSI_READ_CAPACITY   0x25
#define SCSI_READ10          0x28
#define SCSI_READ_TOC        0x43
#define SCSI_GET_CONFIG      0x46
#define SCSI_GET_EVENT       0x4a
#define SCSI_MODE_SENSE10    0x5a
#define SCSI_READ12          0xa8
#define SENSE_NONE           0x00
#define SENSE_NOT_READY      0x02
#define SENSE_UNIT_ATTENTION 0x06
#define SENSE_MEDIUM_ERROR   0x03
#define SENSE_ILLEGAL        0x05
#define ASC_INVALID_OPCODE   0x20
#define ASC_LBA_RANGE        0x21
#define ASC_INVALID_FIELD    0x24
#define ASC_NO_SAVING        0x39
#define ASC_READ_ERROR       0x11
#define ASC_MEDIUM_CHANGED   0x28 /* NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED */
#define ASC_NO_MEDIUM        0x3a /* MEDIUM NOT PRESENT */
#define ASC_REMOVAL_PREVENT  0x53 /* with ASCQ 02h: MEDIUM REMOVAL PREVENTED */

/* GET EVENT STATUS NOTIFICATION media event codes (MMC-6 6.8.2.4). */
#define MEDIA_EVENT_NONE    0
#define MEDIA_EVENT_NEW     2
#define MEDIA_EVENT_REMOVAL 3

/* How a command ended. */
enum cmd_status {
	CMD_OK,
	CMD_ABORT,      /* ERR with ABRT: unsupported or malformed */
	CMD_IDNF,       /* ERR with IDNF: LBA out of range */
	CMD_MEDIA,      /* ERR with UNC: the image failed */
	CMD_HOST_BUS,   /* a guest address outside RAM: PxIS.HBFS */
	CMD_CHECK_COND, /* ATAPI CHECK CONDITION; sense in the port */
};

struct ahci_hba;

/** One port and the drive behind it (AHCI 3.3; the drive: ATA8-ACS/MMC). */
struct ahci_port {
	struct ahci_hba *hba;
	unsigned num;
	bool present;
	bool atapi;
	struct blockif *bi;
	struct blockif_ctx *ctx;
	uint64_t sectors; /* disk: logical sectors; CD: 2048-byte blocks */
	uint32_t sectsz;  /* disk: logical sector size, bytes */
	char serial[21], model[41], rev[9];
	uint16_t nmrr;     /* nominal media rotation rate (IDENTIFY word 217) */
	bool write_cache;  /* SET FEATURES 02h/82h; off: flush after writes */
	uint8_t xfer_mode; /* SET FEATURES 03h: the selected transfer mode */
	/* registers */
	uint64_t clb, fb; /* command list (1 KiB aligned), received FIS (256) */
	uint32_t is, ie, cmd, tfd, sig, ssts, sctl, serr, sact, ci;
	bool halted; /* an error stopped command processing until ST=0 */
	bool srst;   /* a device-control FIS with SRST set was seen */
	/* ATAPI sense data for REQUEST SENSE */
	uint8_t sense_key, asc, ascq;
	/* CD medium (MMC-6 4.2): changed by cd_change() and START STOP UNIT */
	bool medium;         /* a medium is in the tray */
	bool locked;         /* PREVENT ALLOW MEDIUM REMOVAL: prevented (MMC-6 6.14) */
	bool unit_attention; /* a new medium: the next command hears of it */
	uint8_t media_event; /* MEDIA_EVENT_* not yet reported by GESN */
};

/** The HBA: generic host control plus its ports (AHCI 3.1). */
struct ahci_hba {
	pthread_mutex_t lock; /* all registers and all command processing */
	struct pci_func *f;
	struct machine *m;
	uint32_t cap, ghc, is, pi;
	bool intx_level;
	struct ahci_port port[AHCI_MAX_PORTS];
	struct iovec iov[AHCI_MAX_PRDT]; /* the command being run (under lock) */
};

/* The command being executed: copies of what the guest wrote. */
struct ahci_cmd {
	unsigned slot;
	uint64_t hdr_gpa; /* its command header */
	uint64_t ctba;    /* its command table */
	unsigned prdtl;   /* PRDT entries */
	uint8_t cfis[64];
	uint8_t acmd[16];
	bool ncq;
	unsigned tag;  /* NCQ tag */
	bool pio_in;   /* PIO data-in: a PIO setup FIS precedes the D2H FIS */
	uint32_t xfer; /* bytes moved (PRDBC) */
};

static struct ratelimit ahci_rl = RATELIMIT_INIT;

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_be16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, v >> 16);
	put_be16(p + 2, v);
}

static uint32_t be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t be32(const uint8_t *p)
{
	return be16(p) << 16 | be16(p + 2);
}

static struct guest_mem *gmem(const struct ahci_port *p)
{
	return &p->hba->m->vm.mem;
}

/* ---- interrupts (AHCI 10.6) ---- */

/*
 * Recompute IS from every port's PxIS & PxIE and drive the line: INTx is a
 * level (high while GHC.IE and IS), MSI an edge sent when `event` says
 * something new became pending.
 */
static void hba_update_irq(struct ahci_hba *h, bool event)
{
	bool msi = pci_msi_enabled(h->f);

	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++)
		if (h->port[i].is & h->port[i].ie)
			h->is |= 1u << i;
	if ((h->ghc & GHC_IE) && h->is != 0 && !msi) {
		if (!h->intx_level)
			pci_intx_assert(h->f);
		h->intx_level = true;
		return;
	}
	if (h->intx_level)
		pci_intx_deassert(h->f);
	h->intx_level = false;
	if ((h->ghc & GHC_IE) && h->is != 0 && msi && event)
		pci_interrupt(h->f, 0);
}

static void port_raise(struct ahci_port *p, uint32_t bits)
{
	p->is |= bits;
	hba_update_irq(p->hba, (bits & p->ie) != 0);
}

/* ---- received FIS area (AHCI 4.2.1) ---- */

static void fis_post(struct ahci_port *p, unsigned off, const uint8_t *fis, unsigned len)
{
	uint8_t *dst;

	if (!(p->cmd & PCMD_FRE))
		return;
	dst = gmem_ptr(gmem(p), p->fb + off, len, true);
	if (dst == NULL) {
		log_ratelimited(&ahci_rl, LOG_WARN,
		                "ahci: port %u: received-FIS area 0x%llx outside RAM", p->num,
		                (unsigned long long)p->fb);
		p->is |= PIS_HBFS;
		return;
	}
	memcpy(dst, fis, len);
}

/* A D2H register FIS (SATA 3.x 10.5.6) with the command's LBA echoed. */
static void post_d2h(struct ahci_port *p, const struct ahci_cmd *c, uint8_t status, uint8_t error)
{
	uint8_t fis[20] = {FIS_D2H, 0x40, status, error};

	if (c != NULL) {
		memcpy(fis + 4, c->cfis + 4, 7); /* LBA, device, LBA exp */
		fis[12] = c->cfis[12];
		fis[13] = c->cfis[13];
	}
	if (p->atapi && c != NULL)
		fis[12] = 3; /* interrupt reason: I/O and C/D, command done */
	fis_post(p, RFIS_D2H, fis, sizeof(fis));
}

/* A PIO setup FIS (SATA 10.5.11): E_Status carries the ending status. */
static void post_pio_setup(struct ahci_port *p, const struct ahci_cmd *c, uint8_t status)
{
	uint8_t fis[20] = {FIS_PIO, 0x60, status | ATA_S_DRQ, 0};

	memcpy(fis + 4, c->cfis + 4, 7);
	fis[12] = c->cfis[12];
	fis[13] = c->cfis[13];
	fis[15] = status;
	fis[16] = (uint8_t)c->xfer;
	fis[17] = (uint8_t)(c->xfer >> 8);
	fis_post(p, RFIS_PIO, fis, sizeof(fis));
}

/* A Set Device Bits FIS (SATA 10.5.7) completing NCQ tag `tag`. */
static void post_sdb(struct ahci_port *p, unsigned tag, uint8_t status, uint8_t error)
{
	uint8_t fis[8] = {FIS_SDB, 0x40, status & 0x77, error};
	uint32_t bit = 1u << tag;

	memcpy(fis + 4, &bit, 4);
	fis_post(p, RFIS_SDB, fis, sizeof(fis));
}

/* The signature FIS a drive sends after reset (ATA8-ACS 9.12). */
static void post_signature(struct ahci_port *p)
{
	uint8_t fis[20] = {FIS_D2H, 0, STATUS_OK, 1};

	fis[4] = (uint8_t)p->sig;         /* LBA low */
	fis[5] = (uint8_t)(p->sig >> 16); /* LBA mid */
	fis[6] = (uint8_t)(p->sig >> 24); /* LBA high */
	fis[12] = (uint8_t)(p->sig >> 8); /* count */
	fis_post(p, RFIS_D2H, fis, sizeof(fis));
}

/* ---- command completion ---- */

static uint8_t error_bits(const struct ahci_port *p, enum cmd_status st)
{
	switch (st) {
	case CMD_IDNF:
		return ATA_E_IDNF | ATA_E_ABRT;
	case CMD_MEDIA:
		return ATA_E_UNC;
	case CMD_CHECK_COND:
		return (uint8_t)(p->sense_key << 4) | ATA_E_ABRT;
	default:
		return ATA_E_ABRT;
	}
}

static void complete_ok(struct ahci_port *p, struct ahci_cmd *c)
{
	uint32_t prdbc = c->xfer;

	p->tfd = STATUS_OK;
	if (c->ncq) {
		p->ci &= ~(1u << c->slot);
		p->sact &= ~(1u << c->tag);
		post_sdb(p, c->tag, STATUS_OK, 0);
		port_raise(p, PIS_SDBS);
		return;
	}
	if (gmem_write(gmem(p), c->hdr_gpa + 4, &prdbc, 4) < 0)
		p->is |= PIS_HBFS;
	if (c->pio_in)
		post_pio_setup(p, c, STATUS_OK);
	post_d2h(p, c, STATUS_OK, 0);
	p->ci &= ~(1u << c->slot);
	port_raise(p, PIS_DHRS | (c->pio_in ? PIS_PSS : 0));
}

/*
 * An error stops the port (AHCI 6.1.2): PxCI keeps the failed slot (an NCQ
 * command was already accepted, so its PxSACT bit stays instead), PxCMD.CCS
 * names it, and nothing more runs until software clears PxCMD.ST.
 */
static void complete_error(struct ahci_port *p, struct ahci_cmd *c, enum cmd_status st)
{
	uint8_t status = ATA_S_DRDY | ATA_S_ERR, err = error_bits(p, st);

	p->tfd = (uint32_t)err << 8 | status;
	p->halted = true;
	p->cmd = (p->cmd & ~PCMD_CCS_MASK) | c->slot << PCMD_CCS_SHIFT;
	if (st == CMD_HOST_BUS) {
		port_raise(p, PIS_HBFS);
		return;
	}
	if (c->ncq) {
		p->ci &= ~(1u << c->slot);
		post_sdb(p, c->tag, status, err);
	} else {
		post_d2h(p, c, status, err);
	}
	port_raise(p, PIS_TFES | (c->ncq ? PIS_SDBS : PIS_DHRS));
}

static void complete(struct ahci_port *p, struct ahci_cmd *c, enum cmd_status st)
{
	if (st == CMD_OK)
		complete_ok(p, c);
	else
		complete_error(p, c, st);
}

/* ---- PRDT and I/O ---- */

/*
 * Map the first `len` bytes described by the command's PRDT (AHCI 4.2.3.3)
 * into hba->iov, merging entries that are contiguous on the host.  With
 * `partial`, a shorter PRDT is fine and *mapped says how much it holds;
 * otherwise it is an error.  Each entry is read once from guest memory and
 * checked with gmem_ptr() (writable when the device writes to the guest).
 */
static enum cmd_status prdt_map(struct ahci_port *p, const struct ahci_cmd *c, uint64_t len,
                                bool to_guest, bool partial, unsigned *niov, uint64_t *mapped)
{
	struct iovec *iov = p->hba->iov;
	uint64_t left = len;
	unsigned n = 0;

	for (unsigned i = 0; i < c->prdtl && left > 0; i++) {
		uint8_t prd[PRD_SIZE];
		uint64_t dba, dbc;
		uint8_t *hva;

		if (gmem_read(gmem(p), c->ctba + CT_PRDT + (uint64_t)i * PRD_SIZE, prd, PRD_SIZE) <
		    0)
			return CMD_HOST_BUS;
		dba = ((uint64_t)le32(prd + 4) << 32 | le32(prd)) & ~1ull;
		dbc = (le32(prd + 12) & 0x3fffff) + 1;
		if (dbc & 1) {
			log_ratelimited(&ahci_rl, LOG_WARN,
			                "ahci: port %u: odd PRD byte count %llu", p->num,
			                (unsigned long long)dbc);
			return CMD_ABORT;
		}
		if (dbc > left)
			dbc = left;
		hva = gmem_ptr(gmem(p), dba, dbc, to_guest);
		if (hva == NULL) {
			log_ratelimited(&ahci_rl, LOG_WARN,
			                "ahci: port %u: PRD 0x%llx+%llu outside RAM", p->num,
			                (unsigned long long)dba, (unsigned long long)dbc);
			return CMD_HOST_BUS;
		}
		if (n > 0 && (uint8_t *)iov[n - 1].iov_base + iov[n - 1].iov_len == hva) {
			iov[n - 1].iov_len += dbc;
		} else {
			if (n == AHCI_MAX_PRDT)
				return CMD_ABORT;
			iov[n].iov_base = hva;
			iov[n].iov_len = dbc;
			n++;
		}
		left -= dbc;
	}
	if (left > 0 && !partial) {
		log_ratelimited(&ahci_rl, LOG_WARN,
		                "ahci: port %u: PRDT holds less than %llu bytes", p->num,
		                (unsigned long long)len);
		p->is |= PIS_OFS;
		return CMD_ABORT;
	}
	*niov = n;
	*mapped = len - left;
	return CMD_OK;
}

/* Run one request on the port's context and wait for it; 0 or -errno. */
static int port_io(struct ahci_port *p, struct blockif_req *req)
{
	struct blockif_req *done = NULL;
	uint32_t fired = 0;

	blockif_queue(p->ctx, req);
	blockif_submit(p->ctx);
	while (done != req) {
		if (blockif_wait(p->ctx, &done, 1, &fired) == 0)
			done = NULL;
	}
	return req->result;
}

/* Move `len` bytes between the image at `offset` and the PRDT. */
static enum cmd_status transfer(struct ahci_port *p, struct ahci_cmd *c, uint64_t offset,
                                uint64_t len, bool write)
{
	struct blockif_req req = {.op = write ? BLOCKIF_WRITE : BLOCKIF_READ, .offset = offset};
	enum cmd_status st;
	uint64_t mapped;
	unsigned n;

	if (len == 0)
		return CMD_OK;
	st = prdt_map(p, c, len, !write, false, &n, &mapped);
	if (st != CMD_OK)
		return st;
	req.iov = p->hba->iov;
	req.iovcnt = n;
	if (port_io(p, &req) < 0) {
		log_ratelimited(&ahci_rl, LOG_WARN, "ahci: port %u: %s at %llu failed: %s", p->num,
		                write ? "write" : "read", (unsigned long long)offset,
		                strerror(-req.result));
		return req.result == -EROFS ? CMD_ABORT : CMD_MEDIA;
	}
	c->xfer = (uint32_t)len;
	return CMD_OK;
}

/* Copy between a host buffer and iov[0..n); returns bytes copied. */
static uint64_t iov_copy(struct iovec *iov, unsigned n, uint8_t *buf, uint64_t len, bool to_iov)
{
	uint64_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		uint64_t l = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;

		if (to_iov)
			memcpy(iov[i].iov_base, buf + done, l);
		else
			memcpy(buf + done, iov[i].iov_base, l);
		done += l;
	}
	return done;
}

/* Copy a device-made buffer (at most `len` bytes) to the PRDT. */
static enum cmd_status copy_to_prdt(struct ahci_port *p, struct ahci_cmd *c, const uint8_t *buf,
                                    uint64_t len)
{
	enum cmd_status st;
	uint64_t mapped;
	unsigned n;

	st = prdt_map(p, c, len, true, true, &n, &mapped);
	if (st != CMD_OK)
		return st;
	c->xfer = (uint32_t)iov_copy(p->hba->iov, n, (uint8_t *)buf, mapped, true);
	return CMD_OK;
}

/* ---- ATA commands (ATA8-ACS) ---- */

/* LBA of a 48-bit command FIS (H2D register FIS, SATA 10.5.5). */
static uint64_t fis_lba48(const uint8_t *fis)
{
	return (uint64_t)fis[4] | (uint64_t)fis[5] << 8 | (uint64_t)fis[6] << 16 |
	       (uint64_t)fis[8] << 24 | (uint64_t)fis[9] << 32 | (uint64_t)fis[10] << 40;
}

static uint64_t fis_lba28(const uint8_t *fis)
{
	return (uint64_t)fis[4] | (uint64_t)fis[5] << 8 | (uint64_t)fis[6] << 16 |
	       (uint64_t)(fis[7] & 0x0f) << 24;
}

/* Is [lba, lba+count) inside the disk?  (overflow-safe) */
static bool lba_in_range(const struct ahci_port *p, uint64_t lba, uint64_t count)
{
	return lba <= p->sectors && count <= p->sectors - lba;
}

/* ATA string: two characters per word, first in the high byte, space-padded. */
static void id_string(uint16_t *id, unsigned word, unsigned nwords, const char *s)
{
	size_t len = strlen(s);

	for (unsigned i = 0; i < nwords * 2; i++) {
		uint8_t ch = i < len ? (uint8_t)s[i] : ' ';

		if (i & 1)
			id[word + i / 2] |= ch;
		else
			id[word + i / 2] = (uint16_t)(ch << 8);
	}
}

/* Word 255: signature A5h and a checksum making all 512 bytes sum to 0. */
static void id_checksum(uint16_t *id)
{
	uint8_t sum = 0xa5;

	for (unsigned i = 0; i < 255; i++)
		sum = (uint8_t)(sum + (id[i] & 0xff) + (id[i] >> 8));
	id[255] = (uint16_t)((uint8_t)-sum << 8 | 0xa5);
}

static void id_common(const struct ahci_port *p, uint16_t *id)
{
	id_string(id, 10, 10, p->serial);
	id_string(id, 23, 4, p->rev);
	id_string(id, 27, 20, p->model);
	id[49] = (1u << 11) | (1u << 9) | (1u << 8); /* IORDY, LBA, DMA */
	id[53] = 0x0006;                             /* words 64-70 and 88 valid */
	id[63] = 0x0007;                             /* multiword DMA 0-2 */
	id[64] = 0x0003;                             /* PIO 3-4 */
	id[65] = id[66] = id[67] = id[68] = 120;
	id[80] = 0x01f0; /* ATA/ATAPI-4 .. ATA8-ACS */
	id[88] = 0x007f; /* UDMA 0-6 supported */
	if ((p->xfer_mode & 0xf8) == 0x40)
		id[88] |= (uint16_t)(1u << (8 + (p->xfer_mode & 7)));
	else if ((p->xfer_mode & 0xf8) == 0x20)
		id[63] |= (uint16_t)(1u << (8 + (p->xfer_mode & 7)));
	id[222] = 0x103f; /* SATA transport, revisions 1.0a-3.0 */
}

/* IDENTIFY DEVICE data for a disk (ATA8-ACS 7.16.7). */
static void identify_disk(const struct ahci_port *p, uint16_t *id)
{
	uint64_t n = p->sectors;
	uint64_t chs = n < 16383ull * 16 * 63 ? n : 16383ull * 16 * 63;
	uint32_t lba28 = n < 0x0fffffff ? (uint32_t)n : 0x0fffffff;

	memset(id, 0, 512);
	id_common(p, id);
	id[0] = 0x0040; /* fixed device */
	id[1] = (uint16_t)(chs / (16 * 63));
	id[3] = 16;
	id[6] = 63;
	id[47] = 0x8010; /* READ/WRITE MULTIPLE: 16 sectors */
	id[50] = 0x4000;
	id[54] = id[1];
	id[55] = 16;
	id[56] = 63;
	id[57] = (uint16_t)chs;
	id[58] = (uint16_t)(chs >> 16);
	id[59] = 0x0110;
	id[60] = (uint16_t)lba28;
	id[61] = (uint16_t)(lba28 >> 16);
	id[75] = AHCI_MAX_SLOTS - 1;                            /* queue depth - 1 */
	id[76] = (1u << 8) | 0x000e;                            /* NCQ; SATA gen 1-3 */
	id[82] = (1u << 6) | (1u << 5) | (1u << 3);             /* look-ahead, write cache, PM */
	id[83] = 0x4000 | (1u << 13) | (1u << 12) | (1u << 10); /* FLUSH EXT, FLUSH, LBA48 */
	id[84] = 0x4000;
	id[85] = (1u << 6) | (p->write_cache ? 1u << 5 : 0) | (1u << 3);
	id[86] = (1u << 13) | (1u << 12) | (1u << 10);
	id[87] = 0x4000;
	for (unsigned i = 0; i < 4; i++)
		id[100 + i] = (uint16_t)(n >> (16 * i));
	id[106] = 0x4000;
	if (p->sectsz > 512) {
		id[106] |= 1u << 12; /* logical sector longer than 256 words */
		id[117] = (uint16_t)(p->sectsz / 2);
		id[118] = (uint16_t)(p->sectsz / 2 >> 16);
	}
	if (blockif_psectsz(p->bi) > p->sectsz) {
		unsigned l = 0;

		while ((p->sectsz << l) < blockif_psectsz(p->bi) && l < 15)
			l++;
		id[106] |= (uint16_t)((1u << 13) | l);
	}
	if (blockif_can_discard(p->bi) && !blockif_is_ro(p->bi)) {
		id[105] = AHCI_DSM_BLOCKS;
		id[169] = 0x0001; /* DATA SET MANAGEMENT: TRIM */
	}
	id[217] = p->nmrr;
	id_checksum(id);
}

/* IDENTIFY PACKET DEVICE data for the CD-ROM (ATA8-ACS 7.17.7). */
static void identify_packet(const struct ahci_port *p, uint16_t *id)
{
	memset(id, 0, 512);
	id_common(p, id);
	/* ATAPI, CD-ROM, removable, DRQ within 50 us, 12-byte packets. */
	id[0] = (2u << 14) | (5u << 8) | (1u << 7) | (2u << 5);
	id[76] = 0x000e;
	id[82] = (1u << 9) | (1u << 4) | (1u << 3); /* DEVICE RESET, PACKET, PM */
	id[83] = 0x4000;
	id[84] = 0x4000;
	id[85] = id[82];
	id[87] = 0x4000;
	id_checksum(id);
}

/* Let the completion's D2H FIS carry the signature (as after a reset). */
static void signature_in_fis(const struct ahci_port *p, struct ahci_cmd *c)
{
	c->cfis[4] = (uint8_t)p->sig;
	c->cfis[5] = (uint8_t)(p->sig >> 16);
	c->cfis[6] = (uint8_t)(p->sig >> 24);
	c->cfis[12] = (uint8_t)(p->sig >> 8);
}

static enum cmd_status ata_identify(struct ahci_port *p, struct ahci_cmd *c, bool packet)
{
	uint16_t id[256];
	uint8_t buf[512];

	if (packet != p->atapi) {
		signature_in_fis(p, c); /* the signature tells which IDENTIFY works */
		return CMD_ABORT;
	}
	if (packet)
		identify_packet(p, id);
	else
		identify_disk(p, id);
	for (unsigned i = 0; i < 256; i++) {
		buf[2 * i] = (uint8_t)id[i];
		buf[2 * i + 1] = (uint8_t)(id[i] >> 8);
	}
	c->pio_in = true;
	return copy_to_prdt(p, c, buf, sizeof(buf));
}

/* Flush the image (fdatasync) before the command completes. */
static enum cmd_status ata_flush(struct ahci_port *p)
{
	struct blockif_req req = {.op = BLOCKIF_FLUSH};

	if (port_io(p, &req) < 0) {
		log_ratelimited(&ahci_rl, LOG_WARN, "ahci: port %u: flush failed: %s", p->num,
		                strerror(-req.result));
		return CMD_MEDIA;
	}
	return CMD_OK;
}

/* READ/WRITE DMA (EXT), FPDMA QUEUED and PIO: `count` sectors at `lba`. */
static enum cmd_status ata_rw(struct ahci_port *p, struct ahci_cmd *c, uint64_t lba, uint64_t count,
                              bool write, bool fua)
{
	enum cmd_status st;

	if (!lba_in_range(p, lba, count)) {
		log_ratelimited(&ahci_rl, LOG_WARN, "ahci: port %u: LBA %llu+%llu beyond %llu",
		                p->num, (unsigned long long)lba, (unsigned long long)count,
		                (unsigned long long)p->sectors);
		return CMD_IDNF;
	}
	st = transfer(p, c, lba * p->sectsz, count * p->sectsz, write);
	if (st == CMD_OK && write && (fua || !p->write_cache))
		st = ata_flush(p);
	return st;
}

/* One 48-bit or 28-bit read/write command with its count (0 = maximum). */
static enum cmd_status ata_rw_cmd(struct ahci_port *p, struct ahci_cmd *c, bool ext, bool write)
{
	const uint8_t *f = c->cfis;
	uint64_t count;

	if (ext) {
		count = (uint64_t)f[12] | (uint64_t)f[13] << 8;
		return ata_rw(p, c, fis_lba48(f), count ? count : 65536, write, false);
	}
	count = f[12] ? f[12] : 256;
	return ata_rw(p, c, fis_lba28(f), count, write, false);
}

/* READ/WRITE FPDMA QUEUED (ATA8-ACS 7.24, 7.63): count in FEATURES, tag in COUNT. */
static enum cmd_status ata_ncq(struct ahci_port *p, struct ahci_cmd *c, bool write)
{
	const uint8_t *f = c->cfis;
	uint64_t count = (uint64_t)f[3] | (uint64_t)f[11] << 8;

	c->ncq = true;
	c->tag = f[12] >> 3;
	return ata_rw(p, c, fis_lba48(f), count ? count : 65536, write, (f[7] & 0x80) != 0);
}

/* DATA SET MANAGEMENT with TRIM (ATA8-ACS 7.10): 8-byte LBA range entries. */
static enum cmd_status ata_dsm(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t ranges[AHCI_DSM_BLOCKS * 512];
	unsigned blocks = c->cfis[12] | (unsigned)c->cfis[13] << 8;
	enum cmd_status st;
	uint64_t mapped;
	unsigned n;

	if (!(c->cfis[3] & 1) || blocks == 0 || blocks > AHCI_DSM_BLOCKS ||
	    !blockif_can_discard(p->bi) || blockif_is_ro(p->bi))
		return CMD_ABORT;
	st = prdt_map(p, c, blocks * 512u, false, false, &n, &mapped);
	if (st != CMD_OK)
		return st;
	iov_copy(p->hba->iov, n, ranges, mapped, false);
	c->xfer = (uint32_t)mapped;
	for (unsigned i = 0; i < blocks * 512u / 8; i++) {
		uint64_t e = 0, lba, len;
		struct blockif_req req = {.op = BLOCKIF_DISCARD};

		for (unsigned b = 0; b < 8; b++)
			e |= (uint64_t)ranges[8 * i + b] << (8 * b);
		lba = e & 0xffffffffffffull;
		len = e >> 48;
		if (len == 0)
			continue;
		if (!lba_in_range(p, lba, len))
			return CMD_IDNF;
		req.offset = lba * p->sectsz;
		req.len = len * p->sectsz;
		if (port_io(p, &req) < 0)
			return req.result == -EOPNOTSUPP || req.result == -EROFS ? CMD_ABORT
			                                                         : CMD_MEDIA;
	}
	return CMD_OK;
}

/* SET FEATURES (ATA8-ACS 7.48): the subcommands Linux and firmware use. */
static enum cmd_status ata_set_features(struct ahci_port *p, struct ahci_cmd *c)
{
	switch (c->cfis[3]) {
	case 0x02: /* enable write cache */
		p->write_cache = true;
		return CMD_OK;
	case 0x82: /* disable write cache */
		p->write_cache = false;
		return ata_flush(p);
	case 0x03: /* set transfer mode (COUNT: the mode) */
		p->xfer_mode = c->cfis[12];
		return CMD_OK;
	case 0x10: /* enable/disable a SATA feature */
	case 0x90:
	case 0x55: /* read look-ahead off/on */
	case 0xaa:
	case 0x66: /* reverting to defaults off/on */
	case 0xcc:
		return CMD_OK;
	default:
		return CMD_ABORT;
	}
}

/* READ VERIFY SECTOR(S) (EXT): only the range is checked. */
static enum cmd_status ata_verify(struct ahci_port *p, struct ahci_cmd *c, bool ext)
{
	const uint8_t *f = c->cfis;
	uint64_t count;

	if (ext) {
		count = (uint64_t)f[12] | (uint64_t)f[13] << 8;
		return lba_in_range(p, fis_lba48(f), count ? count : 65536) ? CMD_OK : CMD_IDNF;
	}
	count = f[12] ? f[12] : 256;
	return lba_in_range(p, fis_lba28(f), count) ? CMD_OK : CMD_IDNF;
}

/* The drive's software reset: signature in PxSIG and a D2H FIS. */
static void device_reset(struct ahci_port *p)
{
	p->sig = p->atapi ? SIG_ATAPI : SIG_ATA;
	p->tfd = 1u << 8 | STATUS_OK; /* diagnostic code 01h: no error */
	p->sense_key = p->asc = p->ascq = 0;
	post_signature(p);
}

static enum cmd_status disk_command(struct ahci_port *p, struct ahci_cmd *c)
{
	switch (c->cfis[2]) {
	case ATA_IDENTIFY:
		return ata_identify(p, c, false);
	case ATA_IDENTIFY_PACKET:
		return ata_identify(p, c, true);
	case ATA_READ_DMA:
		return ata_rw_cmd(p, c, false, false);
	case ATA_WRITE_DMA:
		return ata_rw_cmd(p, c, false, true);
	case ATA_READ_PIO:
		c->pio_in = true;
		return ata_rw_cmd(p, c, false, false);
	case ATA_READ_PIO_EXT:
		c->pio_in = true;
		return ata_rw_cmd(p, c, true, false);
	case ATA_WRITE_PIO:
		return ata_rw_cmd(p, c, false, true);
	case ATA_WRITE_PIO_EXT:
		return ata_rw_cmd(p, c, true, true);
	case ATA_READ_DMA_EXT:
		return ata_rw_cmd(p, c, true, false);
	case ATA_WRITE_DMA_EXT:
		return ata_rw_cmd(p, c, true, true);
	case ATA_READ_FPDMA:
		return ata_ncq(p, c, false);
	case ATA_WRITE_FPDMA:
		return ata_ncq(p, c, true);
	case ATA_FLUSH:
	case ATA_FLUSH_EXT:
		return ata_flush(p);
	case ATA_DSM:
		return ata_dsm(p, c);
	case ATA_READ_VERIFY:
		return ata_verify(p, c, false);
	case ATA_READ_VERIFY_EXT:
		return ata_verify(p, c, true);
	default:
		return CMD_ABORT;
	}
}

/* ---- ATAPI (MMC-6, SPC-4) ---- */

static enum cmd_status check_condition_q(struct ahci_port *p, uint8_t key, uint8_t asc,
                                         uint8_t ascq)
{
	p->sense_key = key;
	p->asc = asc;
	p->ascq = ascq;
	return CMD_CHECK_COND;
}

static enum cmd_status check_condition(struct ahci_port *p, uint8_t key, uint8_t asc)
{
	return check_condition_q(p, key, asc, 0);
}

/* Answer a data-in command with `len` bytes, cut to the allocation length. */
static enum cmd_status atapi_reply(struct ahci_port *p, struct ahci_cmd *c, const uint8_t *buf,
                                   unsigned len, unsigned alloc)
{
	return copy_to_prdt(p, c, buf, len < alloc ? len : alloc);
}

static enum cmd_status atapi_request_sense(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t s[18] = {0x70};

	/* Nothing pending: report what a command would hear now (SPC-4 6.29). */
	if (p->sense_key == SENSE_NONE && p->unit_attention) {
		p->unit_attention = false;
		check_condition(p, SENSE_UNIT_ATTENTION, ASC_MEDIUM_CHANGED);
	} else if (p->sense_key == SENSE_NONE && !p->medium) {
		check_condition(p, SENSE_NOT_READY, ASC_NO_MEDIUM);
	}
	s[2] = p->sense_key;

	s[7] = 10;
	s[12] = p->asc;
	s[13] = p->ascq;
	p->sense_key = p->asc = p->ascq = 0;
	return atapi_reply(p, c, s, sizeof(s), c->acmd[4]);
}

static enum cmd_status atapi_inquiry(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t d[36] = {0x05, 0x80, 0x05, 0x32, 31};

	if (c->acmd[1] & 1) /* vital product data: none */
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
	memcpy(d + 8, "KHYVE   ", 8);
	memset(d + 16, ' ', 16);
	memcpy(d + 16, p->model, strlen(p->model) < 16 ? strlen(p->model) : 16);
	memset(d + 32, ' ', 4);
	memcpy(d + 32, p->rev, strlen(p->rev) < 4 ? strlen(p->rev) : 4);
	return atapi_reply(p, c, d, sizeof(d), be16(c->acmd + 3));
}

static enum cmd_status atapi_read_capacity(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t d[8];

	put_be32(d, p->sectors ? (uint32_t)(p->sectors - 1) : 0);
	put_be32(d + 4, ATAPI_SECTOR);
	return atapi_reply(p, c, d, sizeof(d), sizeof(d));
}

static enum cmd_status atapi_read(struct ahci_port *p, struct ahci_cmd *c, uint64_t lba,
                                  uint64_t count)
{
	enum cmd_status st;

	if (lba > p->sectors || count > p->sectors - lba)
		return check_condition(p, SENSE_ILLEGAL, ASC_LBA_RANGE);
	st = transfer(p, c, lba * ATAPI_SECTOR, count * ATAPI_SECTOR, false);
	if (st == CMD_MEDIA)
		return check_condition(p, SENSE_MEDIUM_ERROR, ASC_READ_ERROR);
	return st;
}

/* An address in a TOC: LBA, or MSF with the 2-second lead-in (MMC 6.26). */
static void toc_address(uint8_t *d, uint32_t lba, bool msf)
{
	if (!msf) {
		put_be32(d, lba);
		return;
	}
	lba += 150;
	d[0] = 0;
	d[1] = (uint8_t)(lba / (60 * 75));
	d[2] = (uint8_t)(lba / 75 % 60);
	d[3] = (uint8_t)(lba % 75);
}

/* READ TOC/PMA/ATIP formats 0 (TOC) and 1 (session info): one data track. */
static enum cmd_status atapi_read_toc(struct ahci_port *p, struct ahci_cmd *c)
{
	bool msf = c->acmd[1] & 2;
	unsigned format = c->acmd[2] & 0x0f, track = c->acmd[6], len = 4;
	uint32_t leadout =
	    p->sectors > 0xffffffffu - 150 ? 0xffffffffu - 150 : (uint32_t)p->sectors;
	uint8_t d[32] = {0};

	if (format == 0 && c->acmd[9] >> 6) /* old drives: format in the control byte */
		format = c->acmd[9] >> 6;
	d[2] = 1;
	d[3] = 1;
	if (format == 0) {
		if (track > 1 && track != 0xaa)
			return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
		if (track <= 1) {
			d[len + 1] = 0x14; /* ADR 1, data track */
			d[len + 2] = 1;
			toc_address(d + len + 4, 0, msf);
			len += 8;
		}
		d[len + 1] = 0x14;
		d[len + 2] = 0xaa; /* lead-out */
		toc_address(d + len + 4, leadout, msf);
		len += 8;
	} else if (format == 1) {
		d[len + 1] = 0x14;
		d[len + 2] = 1; /* first track of the last session */
		toc_address(d + len + 4, 0, msf);
		len += 8;
	} else {
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
	}
	put_be16(d, len - 2);
	return atapi_reply(p, c, d, len, be16(c->acmd + 7));
}

/* Mode pages 01h (error recovery) and 2Ah (capabilities, MMC 7.3). */
static unsigned mode_page(const struct ahci_port *p, uint8_t *d, unsigned page)
{
	if (page == 0x01) {
		memset(d, 0, 12);
		d[0] = 0x01;
		d[1] = 10;
		d[3] = 5; /* read retry count */
		return 12;
	}
	memset(d, 0, 20);
	d[0] = 0x2a;
	d[1] = 18;
	d[4] = 0x40; /* multi-session */
	d[6] = 0x29; /* tray, eject, lock */
	if (p->locked)
		d[6] |= 0x02;  /* lock state: PREVENT ALLOW MEDIUM REMOVAL holds it */
	put_be16(d + 8, 706);  /* 4x, KB/s */
	put_be16(d + 12, 512); /* buffer, KB */
	put_be16(d + 14, 706);
	return 20;
}

static enum cmd_status atapi_mode_sense(struct ahci_port *p, struct ahci_cmd *c)
{
	unsigned pc = c->acmd[2] >> 6, page = c->acmd[2] & 0x3f, len = 8;
	uint8_t d[64] = {0};

	if (pc == 3)
		return check_condition(p, SENSE_ILLEGAL, ASC_NO_SAVING);
	if (page == 0x01 || page == 0x3f)
		len += mode_page(p, d + len, 0x01);
	if (page == 0x2a || page == 0x3f)
		len += mode_page(p, d + len, 0x2a);
	if (len == 8)
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
	put_be16(d, len - 2);
	return atapi_reply(p, c, d, len, be16(c->acmd + 7));
}

/* GET CONFIGURATION (MMC 6.6): profile CD-ROM, core, removable medium, random readable. */
static enum cmd_status atapi_get_config(struct ahci_port *p, struct ahci_cmd *c)
{
	static const uint8_t features[][16] = {
	    {0x00, 0x00, 0x03, 4, 0x00, 0x08, 0x01, 0},    /* profile list: CD-ROM, current */
	    {0x00, 0x01, 0x0b, 8, 0, 0, 0, 2},             /* core: ATAPI */
	    {0x00, 0x03, 0x03, 4, 0x29},                   /* removable medium: tray, eject, lock */
	    {0x00, 0x10, 0x03, 8, 0, 0, 0x08, 0x00, 0, 1}, /* random readable: 2048, blocking 1 */
	};
	unsigned rt = c->acmd[1] & 3, start = be16(c->acmd + 2), len = 8;
	uint8_t d[8 + sizeof(features)] = {0};
	unsigned profile = p->medium ? 0x0008 : 0; /* none current without a medium */

	if (rt == 3)
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
	for (unsigned i = 0; i < sizeof(features) / sizeof(features[0]); i++) {
		unsigned code = be16(features[i]), flen = 4u + features[i][3];

		if (code < start || (rt == 2 && code != start))
			continue;
		memcpy(d + len, features[i], flen);
		if (code == 0 && profile == 0)
			d[len + 6] = 0; /* CD-ROM profile not current */
		len += flen;
	}
	put_be32(d, len - 4);
	put_be16(d + 6, profile);
	return atapi_reply(p, c, d, len, be16(c->acmd + 7));
}

/* GET EVENT STATUS NOTIFICATION (MMC 6.8), polled only: media class. */
static enum cmd_status atapi_get_event(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t d[8] = {0};
	unsigned len = 4;

	if (!(c->acmd[1] & 1))
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_FIELD);
	d[3] = 0x10; /* supported: media */
	if (c->acmd[4] & 0x10) {
		d[2] = 4; /* media class */
		d[4] = p->media_event;
		d[5] = p->medium ? 0x02 : 0; /* medium present; the tray is closed */
		p->media_event = MEDIA_EVENT_NONE;
		len = 8;
	} else {
		d[2] = 0x80; /* no event available */
	}
	put_be16(d, len - 2);
	return atapi_reply(p, c, d, len, be16(c->acmd + 7));
}

/* Take the medium out (the guest's eject or the API's); the caller holds the lock. */
static void cd_eject(struct ahci_port *p)
{
	char err[128];

	if (!p->medium)
		return;
	if (blockif_replace_fd(p->bi, -1, err, sizeof(err)) < 0)
		log_ratelimited(&ahci_rl, LOG_WARN, "ahci: port %u: eject: %s", p->num, err);
	p->medium = false;
	p->sectors = 0;
	p->unit_attention = false;
	p->media_event = MEDIA_EVENT_REMOVAL;
}

/* START STOP UNIT (MMC-6 6.39): LoEj with Start clear ejects, unless locked. */
static enum cmd_status atapi_start_stop(struct ahci_port *p, struct ahci_cmd *c)
{
	uint8_t b = c->acmd[4];

	if ((b >> 4) != 0 || !(b & 2) || (b & 1)) /* power condition, no LoEj, or load */
		return CMD_OK;
	if (p->locked)
		return check_condition_q(p, SENSE_ILLEGAL, ASC_REMOVAL_PREVENT, 0x02);
	cd_eject(p);
	return CMD_OK;
}

/* Commands a pending UNIT ATTENTION does not stop (SPC-4 5.14; as drives do). */
static bool ua_passes(uint8_t op)
{
	return op == SCSI_INQUIRY || op == SCSI_REQUEST_SENSE || op == SCSI_GET_CONFIG ||
	       op == SCSI_GET_EVENT;
}

/* Commands that need a medium: NOT READY, MEDIUM NOT PRESENT without one. */
static bool needs_medium(uint8_t op)
{
	return op == SCSI_TEST_UNIT_READY || op == SCSI_READ_CAPACITY || op == SCSI_READ10 ||
	       op == SCSI_READ12 || op == SCSI_READ_TOC;
}

/* The PACKET command (ATA8-ACS 7.25): the SCSI CDB is in the ACMD area. */
static enum cmd_status atapi_command(struct ahci_port *p, struct ahci_cmd *c)
{
	const uint8_t *cdb = c->acmd;

	if (!(c->cfis[3] & 1))
		c->pio_in = true; /* PIO: Linux reads the ending status from the PIO setup FIS */
	if (cdb[0] != SCSI_REQUEST_SENSE)
		p->sense_key = p->asc = p->ascq = 0;
	if (p->unit_attention && !ua_passes(cdb[0])) {
		p->unit_attention = false; /* reported once (SPC-4 5.14) */
		return check_condition(p, SENSE_UNIT_ATTENTION, ASC_MEDIUM_CHANGED);
	}
	if (!p->medium && needs_medium(cdb[0]))
		return check_condition(p, SENSE_NOT_READY, ASC_NO_MEDIUM);
	switch (cdb[0]) {
	case SCSI_TEST_UNIT_READY:
		return CMD_OK;
	case SCSI_START_STOP:
		return atapi_start_stop(p, c);
	case SCSI_PREVENT_ALLOW:
		p->locked = (cdb[4] & 1) != 0; /* Prevent 01b/11b lock, 00b/10b unlock */
		return CMD_OK;
	case SCSI_REQUEST_SENSE:
		return atapi_request_sense(p, c);
	case SCSI_INQUIRY:
		return atapi_inquiry(p, c);
	case SCSI_READ_CAPACITY:
		return atapi_read_capacity(p, c);
	case SCSI_READ10:
		return atapi_read(p, c, be32(cdb + 2), be16(cdb + 7));
	case SCSI_READ12:
		return atapi_read(p, c, be32(cdb + 2), be32(cdb + 6));
	case SCSI_READ_TOC:
		return atapi_read_toc(p, c);
	case SCSI_MODE_SENSE10:
		return atapi_mode_sense(p, c);
	case SCSI_GET_CONFIG:
		return atapi_get_config(p, c);
	case SCSI_GET_EVENT:
		return atapi_get_event(p, c);
	default:
		log_ratelimited(&ahci_rl, LOG_DEBUG, "ahci: port %u: unknown ATAPI command 0x%02x",
		                p->num, cdb[0]);
		return check_condition(p, SENSE_ILLEGAL, ASC_INVALID_OPCODE);
	}
}

static enum cmd_status cd_command(struct ahci_port *p, struct ahci_cmd *c)
{
	switch (c->cfis[2]) {
	case ATA_PACKET:
		return atapi_command(p, c);
	case ATA_IDENTIFY_PACKET:
		return ata_identify(p, c, true);
	case ATA_IDENTIFY:
		return ata_identify(p, c, false);
	case ATA_DEVICE_RESET:
		device_reset(p);
		signature_in_fis(p, c);
		return CMD_OK;
	default:
		return CMD_ABORT;
	}
}

/* Commands both kinds of drive take as no-ops or answer alike. */
static bool common_command(struct ahci_port *p, struct ahci_cmd *c, enum cmd_status *st)
{
	switch (c->cfis[2]) {
	case ATA_SET_FEATURES:
		*st = ata_set_features(p, c);
		return true;
	case ATA_CHECK_POWER:
		c->cfis[12] = 0xff; /* active or idle */
		*st = CMD_OK;
		return true;
	case ATA_IDLE:
	case ATA_IDLE_IMM:
	case ATA_STANDBY:
	case ATA_STANDBY_IMM:
	case ATA_INIT_PARAMS:
	case ATA_SET_MULTIPLE:
		*st = CMD_OK;
		return true;
	case ATA_EXEC_DIAG:
		device_reset(p);
		signature_in_fis(p, c);
		*st = CMD_OK;
		return true;
	default:
		return false;
	}
}

/* ---- the command list (AHCI 5.5) ---- */

/*
 * A FIS without the C bit updates the device control register: SRST set
 * then cleared is the software reset (AHCI 10.4.1).  The slot completes
 * when the FIS is sent.
 */
static void control_fis(struct ahci_port *p, struct ahci_cmd *c)
{
	bool srst = c->cfis[15] & 0x04;

	if (srst) {
		p->srst = true;
		p->tfd = ATA_S_BSY;
	} else if (p->srst) {
		p->srst = false;
		device_reset(p);
	}
	p->ci &= ~(1u << c->slot);
}

/* Fetch the command header and table of `slot` (copies; one read each). */
static enum cmd_status load_command(struct ahci_port *p, struct ahci_cmd *c, unsigned slot)
{
	uint8_t hdr[CMD_HDR_SIZE];
	unsigned cfl;

	memset(c, 0, sizeof(*c));
	c->slot = slot;
	c->hdr_gpa = p->clb + (uint64_t)slot * CMD_HDR_SIZE;
	if (gmem_read(gmem(p), c->hdr_gpa, hdr, sizeof(hdr)) < 0) {
		log_ratelimited(&ahci_rl, LOG_WARN,
		                "ahci: port %u: command list 0x%llx outside RAM", p->num,
		                (unsigned long long)p->clb);
		return CMD_HOST_BUS;
	}
	cfl = le32(hdr) & 0x1f;
	c->prdtl = le32(hdr) >> 16;
	c->ctba = ((uint64_t)le32(hdr + 12) << 32 | le32(hdr + 8)) & ~0x7full;
	if (gmem_read(gmem(p), c->ctba, c->cfis, sizeof(c->cfis)) < 0 ||
	    gmem_read(gmem(p), c->ctba + CT_ACMD, c->acmd, sizeof(c->acmd)) < 0) {
		log_ratelimited(&ahci_rl, LOG_WARN,
		                "ahci: port %u: command table 0x%llx outside RAM", p->num,
		                (unsigned long long)c->ctba);
		return CMD_HOST_BUS;
	}
	if (c->cfis[0] != FIS_H2D || cfl < 5 || cfl > 16 || c->prdtl > AHCI_MAX_PRDT) {
		log_ratelimited(&ahci_rl, LOG_WARN,
		                "ahci: port %u: bad command (FIS type 0x%02x, CFL %u, PRDTL %u)",
		                p->num, c->cfis[0], cfl, c->prdtl);
		return CMD_ABORT;
	}
	return CMD_OK;
}

static void run_slot(struct ahci_port *p, unsigned slot)
{
	struct ahci_cmd c;
	enum cmd_status st = load_command(p, &c, slot);

	if (st == CMD_OK && !(c.cfis[1] & 0x80)) {
		control_fis(p, &c);
		return;
	}
	if (st == CMD_OK && !common_command(p, &c, &st))
		st = p->atapi ? cd_command(p, &c) : disk_command(p, &c);
	if (st == CMD_ABORT && c.cfis[0] == FIS_H2D)
		log_ratelimited(&ahci_rl, LOG_DEBUG, "ahci: port %u: command 0x%02x aborted",
		                p->num, c.cfis[2]);
	complete(p, &c, st);
}

/* Run every issued slot, lowest first, until none is left or the port halts. */
static void port_run_commands(struct ahci_port *p)
{
	for (unsigned n = 0; n < AHCI_MAX_SLOTS; n++) {
		uint32_t pending = p->ci;

		if (!(p->cmd & PCMD_ST) || p->halted || pending == 0 || !p->present)
			return;
		run_slot(p, (unsigned)__builtin_ctz(pending));
	}
}

/* ---- port registers (AHCI 3.3) ---- */

/* Power-on/HBA-reset values of the port's registers. */
static void port_reset_registers(struct ahci_port *p)
{
	p->clb = p->fb = 0;
	p->is = p->ie = 0;
	p->cmd = PCMD_SUD | PCMD_POD | (p->atapi ? PCMD_ATAPI : 0);
	p->sctl = p->serr = p->sact = p->ci = 0;
	p->halted = p->srst = false;
	p->locked = false; /* a hard reset allows removal again (SPC-4 6.13) */
	p->write_cache = true;
	p->xfer_mode = 0x46; /* UDMA 6 */
}

/* COMRESET done: the link is up and the drive has sent its signature. */
static void port_link_up(struct ahci_port *p)
{
	if (!p->present) {
		p->ssts = 0;
		p->sig = 0xffffffff;
		p->tfd = 0x7f;
		return;
	}
	p->ssts = SSTS_ONLINE;
	device_reset(p);
}

static void port_write_cmd(struct ahci_port *p, uint32_t val)
{
	uint32_t old = p->cmd, cmd = (old & ~PCMD_WRITABLE) | (val & PCMD_WRITABLE);

	if (cmd & PCMD_CLO) /* command list override: forget BSY and DRQ */
		p->tfd &= ~(uint32_t)(ATA_S_BSY | ATA_S_DRQ);
	cmd &= ~PCMD_CLO;
	cmd = (cmd & PCMD_FRE) ? cmd | PCMD_FR : cmd & ~PCMD_FR;
	if (cmd & PCMD_ST) {
		cmd |= PCMD_CR;
	} else {
		cmd &= ~(PCMD_CR | PCMD_CCS_MASK);
		p->ci = p->sact = 0;
		p->halted = false;
	}
	p->cmd = cmd;
}

static void port_write_sctl(struct ahci_port *p, uint32_t val)
{
	uint32_t old_det = p->sctl & 0xf, det = val & 0xf;

	p->sctl = val & 0xfff;
	if (det == 1) { /* COMRESET asserted: no device communication */
		p->ssts = 0;
		p->tfd = 0x7f;
	} else if (det == 0 && old_det == 1) {
		port_link_up(p);
	}
}

static uint32_t port_read(struct ahci_port *p, unsigned off)
{
	switch (off) {
	case PX_CLB:
		return (uint32_t)p->clb;
	case PX_CLBU:
		return (uint32_t)(p->clb >> 32);
	case PX_FB:
		return (uint32_t)p->fb;
	case PX_FBU:
		return (uint32_t)(p->fb >> 32);
	case PX_IS:
		return p->is;
	case PX_IE:
		return p->ie;
	case PX_CMD:
		return p->cmd;
	case PX_TFD:
		return p->tfd;
	case PX_SIG:
		return p->sig;
	case PX_SSTS:
		return p->ssts;
	case PX_SCTL:
		return p->sctl;
	case PX_SERR:
		return p->serr;
	case PX_SACT:
		return p->sact;
	case PX_CI:
		return p->ci;
	default:
		return 0;
	}
}

static void port_write(struct ahci_port *p, unsigned off, uint32_t val)
{
	switch (off) {
	case PX_CLB:
		p->clb = (p->clb & ~0xffffffffull) | (val & ~0x3ffu);
		break;
	case PX_CLBU:
		p->clb = (p->clb & 0xffffffffull) | (uint64_t)val << 32;
		break;
	case PX_FB:
		p->fb = (p->fb & ~0xffffffffull) | (val & ~0xffu);
		break;
	case PX_FBU:
		p->fb = (p->fb & 0xffffffffull) | (uint64_t)val << 32;
		break;
	case PX_IS:
		p->is &= ~val;
		hba_update_irq(p->hba, false);
		break;
	case PX_IE:
		p->ie = val & PIE_MASK;
		hba_update_irq(p->hba, true);
		break;
	case PX_CMD:
		port_write_cmd(p, val);
		break;
	case PX_SCTL:
		port_write_sctl(p, val);
		break;
	case PX_SERR:
		p->serr &= ~val;
		break;
	case PX_SACT:
		if (p->cmd & PCMD_ST)
			p->sact |= val;
		break;
	case PX_CI:
		if (p->cmd & PCMD_ST) {
			p->ci |= val;
			port_run_commands(p);
		}
		break;
	default:
		break; /* read-only or not implemented */
	}
}

/* ---- generic host control (AHCI 3.1) ---- */

static void hba_reset(struct ahci_hba *h)
{
	h->ghc = GHC_AE;
	h->is = 0;
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++) {
		port_reset_registers(&h->port[i]);
		port_link_up(&h->port[i]);
	}
	hba_update_irq(h, false);
}

static uint32_t hba_read(struct ahci_hba *h, unsigned off)
{
	switch (off) {
	case HBA_CAP:
		return h->cap;
	case HBA_GHC:
		return h->ghc;
	case HBA_IS:
		return h->is;
	case HBA_PI:
		return h->pi;
	case HBA_VS:
		return AHCI_VERSION;
	default:
		return 0; /* CCC, EM, CAP2, BOHC: not implemented */
	}
}

static void hba_write(struct ahci_hba *h, unsigned off, uint32_t val)
{
	if (off == HBA_GHC) {
		if (val & GHC_HR) {
			hba_reset(h);
			return;
		}
		h->ghc = GHC_AE | (val & GHC_IE);
		hba_update_irq(h, true);
	} else if (off == HBA_IS) {
		h->is &= ~val;
		hba_update_irq(h, true); /* still-pending ports raise it again */
	}
}

static uint32_t reg_read(struct ahci_hba *h, uint64_t off)
{
	unsigned pn;

	if (off < AHCI_PORT_BASE)
		return hba_read(h, (unsigned)off);
	pn = (unsigned)((off - AHCI_PORT_BASE) / AHCI_PORT_SIZE);
	if (pn >= AHCI_MAX_PORTS || !(h->pi & (1u << pn)))
		return 0;
	return port_read(&h->port[pn], (unsigned)((off - AHCI_PORT_BASE) % AHCI_PORT_SIZE));
}

static void reg_write(struct ahci_hba *h, uint64_t off, uint32_t val)
{
	unsigned pn;

	if (off < AHCI_PORT_BASE) {
		hba_write(h, (unsigned)off, val);
		return;
	}
	pn = (unsigned)((off - AHCI_PORT_BASE) / AHCI_PORT_SIZE);
	if (pn < AHCI_MAX_PORTS && (h->pi & (1u << pn)))
		port_write(&h->port[pn], (unsigned)((off - AHCI_PORT_BASE) % AHCI_PORT_SIZE), val);
}

/** Guest read of the ABAR (BAR 5) at `offset` bytes; `size` 1, 2, 4 or 8. */
static uint64_t ahci_bar_read(struct pci_func *f, int bar, uint64_t offset, unsigned size)
{
	struct ahci_hba *h = f->softc;
	uint64_t v;

	if (bar != AHCI_BAR || offset >= AHCI_BAR_SIZE)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (size == 8)
		v = reg_read(h, offset & ~3ull) | (uint64_t)reg_read(h, (offset & ~3ull) + 4) << 32;
	else
		v = reg_read(h, offset & ~3ull) >> (8 * (offset & 3));
	pthread_mutex_unlock(&h->lock);
	return size < 8 ? v & ((1ull << (8 * size)) - 1) : v;
}

/** Guest write of the ABAR: dword (or qword) accesses only (AHCI 3). */
static void ahci_bar_write(struct pci_func *f, int bar, uint64_t offset, unsigned size,
                           uint64_t val)
{
	struct ahci_hba *h = f->softc;

	if (bar != AHCI_BAR || offset >= AHCI_BAR_SIZE)
		return;
	if (size < 4 || (offset & 3)) {
		log_ratelimited(&ahci_rl, LOG_WARN, "ahci: ignored %u-byte write at 0x%llx", size,
		                (unsigned long long)offset);
		return;
	}
	pthread_mutex_lock(&h->lock);
	reg_write(h, offset, (uint32_t)val);
	if (size == 8)
		reg_write(h, offset + 4, (uint32_t)(val >> 32));
	pthread_mutex_unlock(&h->lock);
}

/* ---- saved state (docs/design/snapshots.md section 2, "ahci") ---- */

/*
 * Section version 1, after the generic PCI part (bus/pci.h): u32 CAP, PI
 * (a restore refuses other ports), GHC, IS, bool intx_level; then per port
 * in PI, lowest first: bool atapi, u64 sectors, u32 sector size, u16 nmrr
 * (a disk must be the same size; a CD's size is its medium's), u64 PxCLB,
 * PxFB, u32 PxIS, PxIE, PxCMD, PxTFD, PxSIG, PxSSTS, PxSCTL, PxSERR,
 * PxSACT, PxCI, bool halted, srst, u8 sense key, ASC, ASCQ, bool write
 * cache, u8 transfer mode, and for a CD bool medium, locked, unit
 * attention, u8 media event.
 *
 * A CD's medium may have been changed through the API since khyve
 * started, and the state file cannot name it (the API passes an fd, not a
 * path), so a restore keeps the medium the options give only when the
 * saved drive had one of the same size.  Otherwise the tray starts empty:
 * a guest that had a medium sees UNIT ATTENTION and a removal event, as
 * if it had been ejected; one that had none sees none.
 */
#define AHCI_STATE_VERSION 1
#define AHCI_QUIESCE_NS    1000000000L

/*
 * pci_devemu.quiesce: commands run from start to end under the HBA lock
 * in the vCPU thread that issued them, so once the lock is ours none is
 * executing (slots still set in PxCI wait for a port that is stopped or
 * halted; a restore scans them again).  Bounded by AHCI_QUIESCE_NS.  Then
 * every disk's image is made stable (blockif_flush), so that what the
 * saved guest was told is written stays written.
 */
static int ahci_quiesce(struct pci_func *f, char *err, size_t errlen)
{
	struct ahci_hba *h = f->softc;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += AHCI_QUIESCE_NS / 1000000000L;
	if (pthread_mutex_timedlock(&h->lock, &until) != 0) {
		snprintf(err, errlen, "ahci: a command is still running after 1 s");
		return -1;
	}
	pthread_mutex_unlock(&h->lock);
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++) {
		int e;

		if (!h->port[i].present || h->port[i].atapi || h->port[i].bi == NULL)
			continue;
		if ((e = blockif_flush(h->port[i].bi)) < 0) {
			snprintf(err, errlen, "ahci: port %u: cannot flush the image: %s", i,
			         strerror(-e));
			return -1;
		}
	}
	return 0;
}

static void save_port(const struct ahci_port *p, struct sbuf *out)
{
	const uint32_t regs[] = {p->is,   p->ie,   p->cmd,  p->tfd,  p->sig,
	                         p->ssts, p->sctl, p->serr, p->sact, p->ci};

	sbuf_put_bool(out, p->atapi);
	sbuf_put_u64(out, p->sectors);
	sbuf_put_u32(out, p->sectsz);
	sbuf_put_u16(out, p->nmrr);
	sbuf_put_u64(out, p->clb);
	sbuf_put_u64(out, p->fb);
	for (unsigned i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		sbuf_put_u32(out, regs[i]);
	sbuf_put_bool(out, p->halted);
	sbuf_put_bool(out, p->srst);
	sbuf_put_u8(out, p->sense_key);
	sbuf_put_u8(out, p->asc);
	sbuf_put_u8(out, p->ascq);
	sbuf_put_bool(out, p->write_cache);
	sbuf_put_u8(out, p->xfer_mode);
	if (p->atapi) {
		sbuf_put_bool(out, p->medium);
		sbuf_put_bool(out, p->locked);
		sbuf_put_bool(out, p->unit_attention);
		sbuf_put_u8(out, p->media_event);
	}
}

/* pci_devemu.save (layout above). */
static int ahci_save(struct pci_func *f, struct sbuf *out, char *err, size_t errlen)
{
	struct ahci_hba *h = f->softc;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&h->lock);
	sbuf_put_u16(out, AHCI_STATE_VERSION);
	sbuf_put_u32(out, h->cap);
	sbuf_put_u32(out, h->pi);
	sbuf_put_u32(out, h->ghc);
	sbuf_put_u32(out, h->is);
	sbuf_put_bool(out, h->intx_level);
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++)
		if (h->pi & (1u << i))
			save_port(&h->port[i], out);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* One port as read, applied only once every port checks out. */
struct ahci_saved_port {
	uint64_t sectors, clb, fb;
	uint32_t sectsz;
	uint32_t is, ie, cmd, tfd, sig, ssts, sctl, serr, sact, ci;
	bool halted, srst, write_cache, medium, locked, unit_attention;
	uint8_t sense_key, asc, ascq, xfer_mode, media_event;
};

#define PCMD_SAVEABLE (PCMD_WRITABLE | PCMD_SUD | PCMD_POD | PCMD_FR | PCMD_CR | PCMD_CCS_MASK)

/* The drive the section describes must be this port's drive. */
static void read_port_drive(const struct ahci_port *p, struct ahci_saved_port *s,
                            struct sbuf_reader *in)
{
	bool atapi = sbuf_get_bool(in);
	uint16_t nmrr;

	s->sectors = sbuf_get_u64(in);
	s->sectsz = sbuf_get_u32(in);
	nmrr = sbuf_get_u16(in);
	if (in->failed)
		return;
	if (atapi != p->atapi)
		sbuf_fail(in, "port %u was a %s, here it is a %s", p->num, atapi ? "CD" : "disk",
		          p->atapi ? "CD" : "disk");
	else if (!atapi && (s->sectors != p->sectors || s->sectsz != p->sectsz))
		sbuf_fail(in, "port %u: disk of %llu %u-byte sectors, this image has %llu of %u",
		          p->num, (unsigned long long)s->sectors, s->sectsz,
		          (unsigned long long)p->sectors, p->sectsz);
	else if (nmrr != p->nmrr)
		sbuf_fail(in, "port %u: nmrr %u, the options say %u", p->num, nmrr, p->nmrr);
}

static void read_port(const struct ahci_port *p, struct ahci_saved_port *s, struct sbuf_reader *in)
{
	uint32_t *regs[] = {&s->is,   &s->ie,   &s->cmd,  &s->tfd,  &s->sig,
	                    &s->ssts, &s->sctl, &s->serr, &s->sact, &s->ci};

	read_port_drive(p, s, in);
	s->clb = sbuf_get_u64(in);
	s->fb = sbuf_get_u64(in);
	for (unsigned i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		*regs[i] = sbuf_get_u32(in);
	s->halted = sbuf_get_bool(in);
	s->srst = sbuf_get_bool(in);
	s->sense_key = sbuf_get_u8(in);
	s->asc = sbuf_get_u8(in);
	s->ascq = sbuf_get_u8(in);
	s->write_cache = sbuf_get_bool(in);
	s->xfer_mode = sbuf_get_u8(in);
	if (p->atapi) {
		s->medium = sbuf_get_bool(in);
		s->locked = sbuf_get_bool(in);
		s->unit_attention = sbuf_get_bool(in);
		s->media_event = sbuf_get_u8(in);
	}
	if (in->failed)
		return;
	if ((s->clb & 0x3ff) || (s->fb & 0xff))
		sbuf_fail(in, "port %u: PxCLB 0x%llx or PxFB 0x%llx misaligned", p->num,
		          (unsigned long long)s->clb, (unsigned long long)s->fb);
	else if ((s->ie & ~PIE_MASK) || (s->cmd & ~PCMD_SAVEABLE) || (s->sctl & ~0xfffu))
		sbuf_fail(in, "port %u: PxIE 0x%x, PxCMD 0x%x or PxSCTL 0x%x has reserved bits",
		          p->num, s->ie, s->cmd, s->sctl);
	else if (s->media_event != MEDIA_EVENT_NONE && s->media_event != MEDIA_EVENT_NEW &&
	         s->media_event != MEDIA_EVENT_REMOVAL)
		sbuf_fail(in, "port %u: media event %u out of range", p->num, s->media_event);
}

/* The medium after a restore (see the section comment): `lock` held. */
static void apply_medium(struct ahci_port *p, const struct ahci_saved_port *s)
{
	bool keep = s->medium && p->medium && s->sectors == p->sectors;

	if (!keep && p->medium)
		cd_eject(p);
	p->locked = s->locked;
	p->unit_attention = s->unit_attention;
	p->media_event = s->media_event;
	if (s->medium && !keep) {
		log_warn("ahci: port %u: the saved CD medium is not the one given; the tray "
		         "starts empty",
		         p->num);
		p->unit_attention = true;
		p->media_event = MEDIA_EVENT_REMOVAL;
	}
}

static void apply_port(struct ahci_port *p, const struct ahci_saved_port *s)
{
	p->clb = s->clb;
	p->fb = s->fb;
	p->is = s->is;
	p->ie = s->ie;
	p->cmd = s->cmd;
	p->tfd = s->tfd;
	p->sig = s->sig;
	p->ssts = s->ssts;
	p->sctl = s->sctl;
	p->serr = s->serr;
	p->sact = s->sact;
	p->ci = s->ci;
	p->halted = s->halted;
	p->srst = s->srst;
	p->sense_key = s->sense_key;
	p->asc = s->asc;
	p->ascq = s->ascq;
	p->write_cache = s->write_cache;
	p->xfer_mode = s->xfer_mode;
	if (p->atapi)
		apply_medium(p, s);
}

/* Read and check the whole section; false when it is refused. */
static bool ahci_read_state(const struct ahci_hba *h, uint32_t *ghc, uint32_t *is, bool *intx_level,
                            struct ahci_saved_port *ports, struct sbuf_reader *in)
{
	uint32_t cap, pi;

	if (sbuf_get_version(in, AHCI_STATE_VERSION) == 0)
		return false;
	cap = sbuf_get_u32(in);
	pi = sbuf_get_u32(in);
	*ghc = sbuf_get_u32(in);
	*is = sbuf_get_u32(in);
	*intx_level = sbuf_get_bool(in);
	if (in->failed)
		return false;
	if (cap != h->cap || pi != h->pi)
		sbuf_fail(in, "CAP 0x%x PI 0x%x, this HBA has CAP 0x%x PI 0x%x", cap, pi, h->cap,
		          h->pi);
	else if (*ghc != GHC_AE && *ghc != (GHC_AE | GHC_IE))
		sbuf_fail(in, "GHC 0x%x out of range", *ghc);
	else if (*is & ~pi)
		sbuf_fail(in, "IS 0x%x names ports that do not exist", *is);
	for (unsigned i = 0; i < AHCI_MAX_PORTS && !in->failed; i++)
		if (pi & (1u << i))
			read_port(&h->port[i], &ports[i], in);
	return !in->failed;
}

/*
 * pci_devemu.restore: put the registers back, drive the interrupt from
 * them, and run what a port still has issued in PxCI (nothing, unless it
 * was issued to a port that can run it: commands run when issued).
 */
static int ahci_restore(struct pci_func *f, struct sbuf_reader *in, char *err, size_t errlen)
{
	struct ahci_hba *h = f->softc;
	struct ahci_saved_port *ports = calloc(AHCI_MAX_PORTS, sizeof(*ports));
	uint32_t ghc, is;
	bool intx_level;

	if (ports == NULL) {
		snprintf(err, errlen, "ahci: out of memory");
		return -1;
	}
	if (!ahci_read_state(h, &ghc, &is, &intx_level, ports, in)) {
		free(ports);
		return -1;
	}
	pthread_mutex_lock(&h->lock);
	h->ghc = ghc;
	h->is = is;
	h->intx_level = intx_level; /* the generic part drove the line to it */
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++)
		if (h->pi & (1u << i))
			apply_port(&h->port[i], &ports[i]);
	hba_update_irq(h, false);
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++)
		if (h->pi & (1u << i))
			port_run_commands(&h->port[i]);
	pthread_mutex_unlock(&h->lock);
	free(ports);
	return 0;
}

/* ---- configuration ---- */

static struct config_node *child_node(struct config_node *node, const char *name)
{
	for (struct config_node *c = config_node_first(node); c != NULL; c = config_node_next(c))
		if (strcmp(config_node_name(c), name) == 0)
			return c;
	return NULL;
}

/* Port N of `node`: "type" = `type`, the rest as block options (path first). */
static int add_port(struct config_node *node, unsigned n, const char *type, const char *conf,
                    char *err, size_t errlen)
{
	char key[32];
	struct config_node *port;

	snprintf(key, sizeof(key), "port.%u.type", n);
	if (config_node_set(node, key, type) < 0) {
		snprintf(err, errlen, "ahci: cannot record port %u", n);
		return -1;
	}
	snprintf(key, sizeof(key), "%u", n);
	port = child_node(child_node(node, "port"), key);
	if (port == NULL)
		return -1;
	/* A CD without a path (options may follow) has an empty tray. */
	if (strcmp(type, "cd") == 0 && (conf == NULL || *conf == '\0'))
		return 0;
	if (strcmp(type, "cd") == 0 && *conf == ',')
		return devopts_parse(port, conf + 1, NULL, "disk", err, errlen);
	return blockif_legacy_config(port, conf, err, errlen);
}

/*
 * bhyve's -s slot,ahci,hd:PATH[,opts],cd:PATH[,opts]...: each "hd:" or
 * "cd:" starts a port; the options up to the next one belong to it.
 */
static int ahci_legacy_config(struct config_node *node, const char *conf, char *err, size_t errlen)
{
	char *copy, *entry;
	unsigned n = 0;
	int rc = 0;

	if (conf == NULL || *conf == '\0') {
		snprintf(err, errlen, "ahci: want hd:PATH or cd:PATH entries");
		return -1;
	}
	copy = strdup(conf);
	if (copy == NULL)
		return -1;
	for (entry = copy; entry != NULL && rc == 0; n++) {
		char *next = strstr(entry, ",hd:"), *next_cd = strstr(entry, ",cd:");

		if (next == NULL || (next_cd != NULL && next_cd < next))
			next = next_cd;
		if (next != NULL)
			*next++ = '\0';
		if (n == AHCI_MAX_PORTS) {
			snprintf(err, errlen, "ahci: more than %d ports", AHCI_MAX_PORTS);
			rc = -1;
		} else if (strncmp(entry, "hd:", 3) != 0 && strncmp(entry, "cd:", 3) != 0) {
			snprintf(err, errlen, "ahci: bad port '%s' (want hd:PATH or cd:PATH)",
			         entry);
			rc = -1;
		} else {
			entry[2] = '\0';
			rc = add_port(node, n, entry, entry + 3, err, errlen);
		}
		entry = next;
	}
	free(copy);
	return rc;
}

static int ahci_hd_legacy_config(struct config_node *node, const char *conf, char *err,
                                 size_t errlen)
{
	return add_port(node, 0, "hd", conf, err, errlen);
}

static int ahci_cd_legacy_config(struct config_node *node, const char *conf, char *err,
                                 size_t errlen)
{
	return add_port(node, 0, "cd", conf, err, errlen);
}

/* An identity string option (ser, model, rev) of at most `max` characters. */
static int port_string(struct config_node *node, const char *key, char *dst, size_t max,
                       const char *def, char *err, size_t errlen)
{
	const char *v = config_node_get(node, key);

	if (v == NULL)
		v = def;
	if (strlen(v) > max) {
		snprintf(err, errlen, "ahci: %s '%s' is longer than %zu characters", key, v, max);
		return -1;
	}
	for (const char *s = v; *s; s++) {
		if (*s < 0x20 || *s > 0x7e) {
			snprintf(err, errlen, "ahci: %s must be printable ASCII", key);
			return -1;
		}
	}
	snprintf(dst, max + 1, "%s", v);
	return 0;
}

/* Serial, model, firmware revision and rotation rate of a port. */
static int port_identity(struct ahci_port *p, struct config_node *node, const char *path, char *err,
                         size_t errlen)
{
	const char *nmrr = config_node_get(node, "nmrr");
	uint32_t h = 2166136261u; /* FNV-1a of the path, for the default serial */
	char ser[21];
	uint64_t v = 0;

	for (const char *s = path; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	snprintf(ser, sizeof(ser), "KHYVE-%04X-%04X", h >> 16, h & 0xffff);
	if (port_string(node, "ser", p->serial, 20, ser, err, errlen) < 0 ||
	    port_string(node, "model", p->model, 40, p->atapi ? "KHYVE DVD-ROM" : "KHYVE SATA DISK",
	                err, errlen) < 0 ||
	    port_string(node, "rev", p->rev, 8, "001", err, errlen) < 0)
		return -1;
	if (nmrr != NULL && (parse_uint(nmrr, 0, 0xfffe, &v) < 0 || (v > 1 && v < 0x401))) {
		snprintf(err, errlen,
		         "ahci: nmrr '%s' (want 0, 1 for solid state, or 1025-65534 rpm)", nmrr);
		return -1;
	}
	p->nmrr = (uint16_t)v;
	return 0;
}

static int port_open(struct ahci_port *p, struct config_node *node, char *err, size_t errlen)
{
	const char *type = config_node_get(node, "type"), *path = config_node_get(node, "path");
	struct blockif_opts o;
	char empty_id[32];
	bool empty;
	int rc;

	if (type == NULL || (strcmp(type, "hd") != 0 && strcmp(type, "cd") != 0)) {
		snprintf(err, errlen, "ahci: port %u: type must be hd or cd", p->num);
		return -1;
	}
	p->atapi = strcmp(type, "cd") == 0;
	empty = p->atapi && (path == NULL || *path == '\0');
	if (empty) {
		/* The default serial is a hash of the path: one per port here. */
		snprintf(empty_id, sizeof(empty_id), "(empty tray on port %u)", p->num);
		path = empty_id;
		rc = blockif_parse_options(node, &o, err, errlen);
	} else {
		rc = blockif_parse_config(node, &path, &o, err, errlen);
	}
	if (rc < 0 || port_identity(p, node, path, err, errlen) < 0)
		return -1;
	if (p->atapi)
		o.ro = true;
	p->bi = empty ? blockif_open_empty(&o) : blockif_open(path, &o, err, errlen);
	if (p->bi == NULL) {
		if (empty)
			snprintf(err, errlen, "ahci: out of memory");
		return -1;
	}
	p->ctx = blockif_ctx_create(p->bi, 1, err, errlen);
	if (p->ctx == NULL)
		return -1;
	p->sectsz = p->atapi ? ATAPI_SECTOR : blockif_sectsz(p->bi);
	p->sectors = blockif_size(p->bi) / p->sectsz;
	p->present = true;
	p->medium = !empty;
	return 0;
}

static void hba_free(struct ahci_hba *h)
{
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++) {
		if (h->port[i].ctx != NULL)
			blockif_ctx_destroy(h->port[i].ctx);
		if (h->port[i].bi != NULL)
			blockif_close(h->port[i].bi);
	}
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* Open the drives of pci.B.S.F.port.N; sets PI and CAP.NP. */
static int hba_open_ports(struct ahci_hba *h, struct config_node *node, char *err, size_t errlen)
{
	struct config_node *ports = child_node(node, "port");
	unsigned top = 0;

	for (struct config_node *c = config_node_first(ports); c != NULL; c = config_node_next(c)) {
		uint64_t n;

		if (parse_uint(config_node_name(c), 0, AHCI_MAX_PORTS - 1, &n) < 0) {
			snprintf(err, errlen, "ahci: bad port number '%s' (0-%d)",
			         config_node_name(c), AHCI_MAX_PORTS - 1);
			return -1;
		}
		if (port_open(&h->port[n], c, err, errlen) < 0)
			return -1;
		h->pi |= 1u << n;
		if (n + 1 > top)
			top = (unsigned)n + 1;
	}
	if (h->pi == 0) {
		snprintf(err, errlen, "ahci: no ports (want hd:PATH or cd:PATH)");
		return -1;
	}
	h->cap = CAP_S64A | CAP_SNCQ | CAP_SCLO | CAP_ISS_GEN3 | CAP_SAM |
	         (AHCI_MAX_SLOTS - 1) << 8 | (top - 1);
	return 0;
}

/* ---- medium changes from the API (core/machine.h) ---- */

#define CD_CHANGE_WAIT_NS 900000000L /* how long change() waits for the lock */

/*
 * machine_media_drive.change for a CD port: put the read-only image on
 * `fd` in the tray, or take the medium out (fd -1).  Commands run under
 * the HBA lock from start to end, so taking it means no command is in
 * flight: the swap falls between two commands, and every command after it
 * sees the new image.  Waits at most CD_CHANGE_WAIT_NS for the lock.
 */
static int cd_change(void *dev, int fd, bool force, char *err, size_t errlen)
{
	struct ahci_port *p = dev;
	struct timespec until;
	int rc;

	if (fd >= 0 && blockif_check_medium(fd, NULL, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += CD_CHANGE_WAIT_NS;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	if (pthread_mutex_timedlock(&p->hba->lock, &until) != 0) {
		snprintf(err, errlen, "the drive is busy (try again)");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rc = -1;
	if (p->locked && !force) {
		snprintf(err, errlen, "the guest locked the tray (force ejects anyway)");
		if (fd >= 0)
			close(fd);
	} else if (fd < 0) {
		cd_eject(p);
		rc = 0;
	} else if (blockif_replace_fd(p->bi, fd, err, errlen) == 0) {
		p->medium = true;
		p->sectors = blockif_size(p->bi) / ATAPI_SECTOR;
		p->unit_attention = true;
		p->media_event = MEDIA_EVENT_NEW;
		rc = 0;
	} /* else the old medium stays, and `err` says why */
	pthread_mutex_unlock(&p->hba->lock);
	return rc;
}

/* machine_media_drive.state for a CD port. */
static void cd_state(void *dev, bool *present, bool *locked, uint64_t *bytes)
{
	struct ahci_port *p = dev;

	pthread_mutex_lock(&p->hba->lock);
	*present = p->medium;
	*locked = p->locked;
	*bytes = p->medium ? blockif_size(p->bi) : 0;
	pthread_mutex_unlock(&p->hba->lock);
}

/* Register each CD port as drive cdN (in port order) with the machine. */
static void hba_add_media_drives(struct ahci_hba *h)
{
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++) {
		struct machine_media_drive d = {.port = i, .dev = &h->port[i]};

		if (!h->port[i].present || !h->port[i].atapi)
			continue;
		snprintf(d.name, sizeof(d.name), "cd%u", h->m->nmedia);
		snprintf(d.device, sizeof(d.device), "ahci-cd");
		snprintf(d.slot, sizeof(d.slot), "%u:%u", h->f->slot, h->f->func);
		d.change = cd_change;
		d.state = cd_state;
		if (machine_add_media_drive(h->m, &d) < 0)
			log_warn("ahci: port %u: more than %d CD drives; its medium stays", i,
			         MACHINE_MAX_MEDIA);
	}
}

static int ahci_init(struct machine *m, struct pci_func *f, struct config_node *node, char *err,
                     size_t errlen)
{
	struct ahci_hba *h = calloc(1, sizeof(*h));

	if (h == NULL) {
		snprintf(err, errlen, "ahci: out of memory");
		return -1;
	}
	pthread_mutex_init(&h->lock, NULL);
	h->m = m;
	h->f = f;
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++) {
		h->port[i].hba = h;
		h->port[i].num = i;
	}
	if (hba_open_ports(h, node, err, errlen) < 0)
		goto fail;
	/* Intel ICH8 AHCI, as bhyve: class mass storage, SATA, AHCI 1.0. */
	pci_set_ids(f, 0x8086, 0x2821, 0x01, 0x06, 0x01, 0);
	if (pci_alloc_bar(f, AHCI_BAR, PCI_BAR_MEM32, AHCI_BAR_SIZE) < 0 ||
	    pci_add_msi_cap(f, 1) < 0) {
		snprintf(err, errlen, "ahci: cannot place BAR 5 or MSI");
		goto fail;
	}
	pci_enable_intx(f);
	f->softc = h;
	hba_reset(h);
	/* Disks get their counter names (disk0, ...) in port order. */
	for (unsigned i = 0; i < AHCI_MAX_PORTS; i++)
		if (h->port[i].present && blockif_register_counters(h->port[i].bi) < 0)
			log_warn("ahci: port %u: no counters", i);
	hba_add_media_drives(h);
	return 0;
fail:
	hba_free(h);
	return -1;
}

/* What a port reads: its type, the block options, the identity strings. */
static const char *const ahci_keys[] = {
    "port.*.type",
    "port.*.path",
    "port.*.ro",
    "port.*.nocache",
    "port.*.direct",
    "port.*.sync",
    "port.*.nodelete",
    "port.*.sectorsize",
    "port.*.ser",
    "port.*.model",
    "port.*.rev",
    "port.*.nmrr",
    NULL,
};

PCI_DEVEMU(ahci) = {
    .name = "ahci",
    .descr = "AHCI SATA controller, up to 32 disk or CD ports",
    .usage = "  -s SLOT,ahci,hd:PATH[,OPTION]...[,cd:PATH[,OPTION]...]...\n"
             "  hd:PATH          a SATA disk on the next port\n"
             "  cd:PATH          an ATAPI CD-ROM (read-only) on the next port\n"
             "  cd:              a CD-ROM with an empty tray (vm.media-insert fills it)\n"
             "  options of the port before them:\n"
             "  nmrr=N           nominal media rotation rate (1: SSD)\n"
             "  ser=S            serial number\n"
             "  rev=R            firmware revision\n"
             "  model=M          model name\n" BLOCKIF_USAGE_FLAGS BLOCKIF_USAGE_SECTORSIZE,
    .keys = ahci_keys,
    .legacy_config = ahci_legacy_config,
    .init = ahci_init,
    .bar_read = ahci_bar_read,
    .bar_write = ahci_bar_write,
    .quiesce = ahci_quiesce,
    .save = ahci_save,
    .restore = ahci_restore,
};

PCI_DEVEMU(ahci_hd) = {
    .name = "ahci-hd",
    .descr = "AHCI controller with one SATA disk",
    .usage = "  -s SLOT,ahci-hd,PATH[,OPTION]...\n"
             "  PATH             disk image or block device\n"
             "  nmrr=N           nominal media rotation rate (1: SSD)\n"
             "  ser=S            serial number\n"
             "  rev=R            firmware revision\n"
             "  model=M          model name\n" BLOCKIF_USAGE_FLAGS BLOCKIF_USAGE_SECTORSIZE,
    .keys = ahci_keys,
    .legacy_config = ahci_hd_legacy_config,
    .init = ahci_init,
    .bar_read = ahci_bar_read,
    .bar_write = ahci_bar_write,
    .quiesce = ahci_quiesce,
    .save = ahci_save,
    .restore = ahci_restore,
};

PCI_DEVEMU(ahci_cd) = {
    .name = "ahci-cd",
    .descr = "AHCI controller with one ATAPI CD-ROM",
    .usage = "  -s SLOT,ahci-cd[,PATH][,OPTION]...\n"
             "  PATH             ISO image (read-only); none: an empty tray\n"
             "  nmrr=N           nominal media rotation rate (1: SSD)\n"
             "  ser=S            serial number\n"
             "  rev=R            firmware revision\n"
             "  model=M          model name\n" BLOCKIF_USAGE_FLAGS BLOCKIF_USAGE_SECTORSIZE,
    .keys = ahci_keys,
    .legacy_config = ahci_cd_legacy_config,
    .init = ahci_init,
    .bar_read = ahci_bar_read,
    .bar_write = ahci_bar_write,
    .quiesce = ahci_quiesce,
    .save = ahci_save,
    .restore = ahci_restore,
};
