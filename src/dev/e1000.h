/*
 * e1000: the Intel 82545EM gigabit Ethernet controller (copper), as bhyve
 * emulates it (-s N,e1000,TAP[,mac=...]).  Register offsets and bits from
 * Intel's "PCI/PCI-X Family of Gigabit Ethernet Controllers Software
 * Developer's Manual" (8254x SDM), section 13 (registers) and section 3
 * (descriptors); shared by the device (e1000.c), its unit tests and its
 * fuzz target, which drive it as a guest driver would.
 */
#ifndef KHYVE_E1000_H
#define KHYVE_E1000_H

#define E1000_VENDOR    0x8086
#define E1000_DEVICE    0x100f  /* 82545EM, copper */
#define E1000_MMIO_SIZE 0x20000 /* BAR 0: 128 KiB of registers */
#define E1000_IO_SIZE   8       /* BAR 2: IOADDR, IODATA */
#define E1000_IOADDR    0x0
#define E1000_IODATA    0x4

/* Register offsets in BAR 0 (SDM table 13-2). */
#define E1000_CTRL         0x0000
#define E1000_STATUS       0x0008
#define E1000_EECD         0x0010
#define E1000_EERD         0x0014
#define E1000_MDIC         0x0020
#define E1000_ICR          0x00c0
#define E1000_ITR          0x00c4
#define E1000_ICS          0x00c8
#define E1000_IMS          0x00d0
#define E1000_IMC          0x00d8
#define E1000_RCTL         0x0100
#define E1000_TCTL         0x0400
#define E1000_TIPG         0x0410
#define E1000_PBA          0x1000
#define E1000_RDBAL        0x2800
#define E1000_RDBAH        0x2804
#define E1000_RDLEN        0x2808
#define E1000_RDH          0x2810
#define E1000_RDT          0x2818
#define E1000_RDTR         0x2820
#define E1000_RADV         0x282c
#define E1000_TDBAL        0x3800
#define E1000_TDBAH        0x3804
#define E1000_TDLEN        0x3808
#define E1000_TDH          0x3810
#define E1000_TDT          0x3818
#define E1000_TIDV         0x3820
#define E1000_TADV         0x382c
#define E1000_STATS        0x4000 /* statistics: 0x4000-0x40fc, clear on read */
#define E1000_STATS_END    0x4100
#define E1000_GPRC         0x4074 /* good packets received */
#define E1000_GPTC         0x4080 /* good packets transmitted */
#define E1000_GORCL        0x4088 /* good octets received, low and high */
#define E1000_GORCH        0x408c
#define E1000_GOTCL        0x4090
#define E1000_GOTCH        0x4094
#define E1000_TORL         0x40c0 /* total octets received */
#define E1000_TORH         0x40c4
#define E1000_TOTL         0x40c8
#define E1000_TOTH         0x40cc
#define E1000_TPR          0x40d0 /* total packets received */
#define E1000_TPT          0x40d4
#define E1000_MPTC         0x40f0
#define E1000_BPTC         0x40f4
#define E1000_MPRC         0x407c
#define E1000_BPRC         0x4078
#define E1000_RXCSUM       0x5000
#define E1000_MTA          0x5200 /* 128 words */
#define E1000_RA           0x5400 /* 16 pairs RAL, RAH */

#define E1000_CTRL_SLU     (1u << 6)
#define E1000_CTRL_RST     (1u << 26)
#define E1000_CTRL_PHY_RST (1u << 31)

#define E1000_STATUS_FD    (1u << 0)
#define E1000_STATUS_LU    (1u << 1)
#define E1000_STATUS_1000  (2u << 6)

/* EECD: the Microwire EEPROM's wires, bit-banged by the driver. */
#define E1000_EECD_SK         (1u << 0)
#define E1000_EECD_CS         (1u << 1)
#define E1000_EECD_DI         (1u << 2)
#define E1000_EECD_DO         (1u << 3)
#define E1000_EECD_REQ        (1u << 6)
#define E1000_EECD_GNT        (1u << 7)
#define E1000_EECD_PRES       (1u << 8)
#define E1000_EERD_START      (1u << 0)
#define E1000_EERD_DONE       (1u << 4)
#define E1000_EEPROM_WORDS    64
#define E1000_EEPROM_CSUM_SUM 0xbaba /* words 0-0x3f add up to this */

#define E1000_MDIC_READY      (1u << 28)
#define E1000_MDIC_ERROR      (1u << 30)
#define E1000_MDIC_OP_WRITE   (1u << 26)
#define E1000_MDIC_OP_READ    (2u << 26)
#define E1000_PHY_ADDR        1 /* where the 82545's M88 PHY answers */

/* ICR/ICS/IMS/IMC bits. */
#define E1000_ICR_TXDW   (1u << 0)
#define E1000_ICR_TXQE   (1u << 1)
#define E1000_ICR_LSC    (1u << 2)
#define E1000_ICR_RXDMT0 (1u << 4)
#define E1000_ICR_RXO    (1u << 6)
#define E1000_ICR_RXT0   (1u << 7)
#define E1000_ICR_MDAC   (1u << 9)

#define E1000_RCTL_EN    (1u << 1)
#define E1000_RCTL_UPE   (1u << 3)
#define E1000_RCTL_MPE   (1u << 4)
#define E1000_RCTL_LPE   (1u << 5)
#define E1000_RCTL_BAM   (1u << 15)
#define E1000_RCTL_BSEX  (1u << 25)
#define E1000_RCTL_SECRC (1u << 26)
#define E1000_TCTL_EN    (1u << 1)
#define E1000_RAH_AV     (1u << 31)

/* Descriptors (SDM section 3.2.3 receive, 3.3 transmit): 16 bytes. */
#define E1000_DESC_SIZE     16
#define E1000_RXD_DD        0x01
#define E1000_RXD_EOP       0x02
#define E1000_RXD_IXSM      0x04
#define E1000_RXD_ERR_RXE   0x80
#define E1000_TXD_EOP       0x01 /* command byte: end of packet */
#define E1000_TXD_IFCS      0x02
#define E1000_TXD_IC        0x04 /* legacy: insert checksum */
#define E1000_TXD_RS        0x08 /* report status (DD) */
#define E1000_TXD_TSE       0x04 /* data descriptor: TCP segmentation */
#define E1000_TXD_DEXT      0x20 /* extended (context or data) descriptor */
#define E1000_TXD_DD        0x01
#define E1000_TXD_DTYP_CTX  0x0
#define E1000_TXD_DTYP_DATA 0x1
#define E1000_TUCMD_TCP     0x01 /* context: TCP (else UDP) */
#define E1000_TUCMD_IP      0x02 /* context: IPv4 (else IPv6) */
#define E1000_TUCMD_TSE     0x04
#define E1000_POPTS_IXSM    0x01
#define E1000_POPTS_TXSM    0x02

/* Frames on the tap carry a virtio-net header (backend/tap.h) that the
 * device writes zeroed and skips: no offloads pass through it. */
#define E1000_VNET_HDR 10

#endif
