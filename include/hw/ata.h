/*
 * ATA register interface, commands and on-wire structures of a legacy IDE
 * channel with bus-master DMA (ATA/ATAPI-7 and ATA8-ACS for the commands,
 * the Intel PIIX bus-master IDE interface for DMA).
 *
 * Shared by the device model (hw/ide) and by drivers of it (the qtest
 * harness), so that both speak from one definition.
 */
#ifndef HW_ATA_H
#define HW_ATA_H

#include "util/osdep.h"

/* Logical sector size: ATA transfers and addresses 512-byte sectors. */
#define ATA_SECTOR_SIZE 512

/*
 * Command block registers, by offset from the block's base (0x1f0 on the
 * primary channel).  Offsets 1 and 7 name two registers each: the first
 * is read, the second written.
 */
enum {
    ATA_REG_DATA    = 0,
    ATA_REG_ERROR   = 1,    /* read */
    ATA_REG_FEATURE = 1,    /* write */
    ATA_REG_NSECTOR = 2,    /* sector count */
    ATA_REG_LBAL    = 3,    /* LBA low, or sector number (CHS) */
    ATA_REG_LBAM    = 4,    /* LBA mid, or cylinder low */
    ATA_REG_LBAH    = 5,    /* LBA high, or cylinder high */
    ATA_REG_DEVICE  = 6,    /* device/head */
    ATA_REG_STATUS  = 7,    /* read: clears a pending interrupt */
    ATA_REG_COMMAND = 7,    /* write: starts a command */
    ATA_REG_COUNT   = 8,
};

/*
 * The control block is one register (0x3f6 on the primary channel):
 * Alternate Status when read (does not touch the interrupt), Device
 * Control when written.
 */
#define ATA_DEVCTL_NIEN 0x02    /* interrupt line disabled */
#define ATA_DEVCTL_SRST 0x04    /* software reset of both devices */
#define ATA_DEVCTL_HOB  0x80    /* reads return the previous (high) bytes */

/* Device register bits. */
#define ATA_DEV_HEAD_MASK 0x0f  /* head (CHS) or LBA bits 27:24 (LBA28) */
#define ATA_DEV_DEV       0x10  /* selects device 1 */
#define ATA_DEV_LBA       0x40  /* LBA addressing (else CHS) */
#define ATA_DEV_OBS       0xa0  /* obsolete bits, set by old drivers */

/* Status register. */
#define ATA_STAT_ERR  0x01      /* the command failed: see Error */
#define ATA_STAT_DRQ  0x08      /* data transfer requested */
#define ATA_STAT_DSC  0x10      /* seek complete (obsolete, always set) */
#define ATA_STAT_DF   0x20      /* device fault */
#define ATA_STAT_DRDY 0x40      /* device ready for commands */
#define ATA_STAT_BSY  0x80      /* busy: no other bit is valid */

/* Error register. */
#define ATA_ERR_ABRT  0x04      /* command aborted (unsupported, bad args) */
#define ATA_ERR_IDNF  0x10      /* address outside the device */
#define ATA_ERR_UNC   0x40      /* uncorrectable data error (read failed) */
/* Error register value after reset or diagnostics: no error found. */
#define ATA_DIAG_OK   0x01

/* Commands implemented by the ATA disk. */
enum {
    ATA_CMD_NOP                 = 0x00,
    ATA_CMD_RECALIBRATE         = 0x10,
    ATA_CMD_READ                = 0x20,     /* READ SECTORS */
    ATA_CMD_READ_NORETRY        = 0x21,
    ATA_CMD_READ_EXT            = 0x24,
    ATA_CMD_READ_DMA_EXT        = 0x25,
    ATA_CMD_READ_MULTIPLE_EXT   = 0x29,
    ATA_CMD_WRITE               = 0x30,     /* WRITE SECTORS */
    ATA_CMD_WRITE_NORETRY       = 0x31,
    ATA_CMD_WRITE_EXT           = 0x34,
    ATA_CMD_WRITE_DMA_EXT       = 0x35,
    ATA_CMD_WRITE_MULTIPLE_EXT  = 0x39,
    ATA_CMD_WRITE_DMA_FUA_EXT   = 0x3d,
    ATA_CMD_VERIFY              = 0x40,     /* READ VERIFY SECTORS */
    ATA_CMD_VERIFY_NORETRY      = 0x41,
    ATA_CMD_VERIFY_EXT          = 0x42,
    ATA_CMD_DIAGNOSE            = 0x90,     /* EXECUTE DEVICE DIAGNOSTIC */
    ATA_CMD_INIT_DEV_PARAMS     = 0x91,
    ATA_CMD_PACKET              = 0xa0,
    ATA_CMD_IDENTIFY_PACKET     = 0xa1,
    ATA_CMD_READ_MULTIPLE       = 0xc4,
    ATA_CMD_WRITE_MULTIPLE      = 0xc5,
    ATA_CMD_SET_MULTIPLE        = 0xc6,
    ATA_CMD_READ_DMA            = 0xc8,
    ATA_CMD_READ_DMA_NORETRY    = 0xc9,
    ATA_CMD_WRITE_DMA           = 0xca,
    ATA_CMD_WRITE_DMA_NORETRY   = 0xcb,
    ATA_CMD_WRITE_MULTIPLE_FUA_EXT = 0xce,
    ATA_CMD_STANDBY_IMMEDIATE   = 0xe0,
    ATA_CMD_IDLE_IMMEDIATE      = 0xe1,
    ATA_CMD_STANDBY             = 0xe2,
    ATA_CMD_IDLE                = 0xe3,
    ATA_CMD_CHECK_POWER_MODE    = 0xe5,
    ATA_CMD_FLUSH_CACHE         = 0xe7,
    ATA_CMD_FLUSH_CACHE_EXT     = 0xea,
    ATA_CMD_IDENTIFY            = 0xec,
    ATA_CMD_SET_FEATURES        = 0xef,
};

/* SET FEATURES subcommands (Features register). */
enum {
    ATA_SF_ENABLE_WCE        = 0x02,
    ATA_SF_SET_XFER_MODE     = 0x03,    /* mode in the Sector Count */
    ATA_SF_DISABLE_LOOKAHEAD = 0x55,
    ATA_SF_DISABLE_REVERT    = 0x66,    /* keep settings over SRST */
    ATA_SF_DISABLE_WCE       = 0x82,
    ATA_SF_ENABLE_LOOKAHEAD  = 0xaa,
    ATA_SF_ENABLE_REVERT     = 0xcc,
};

/* Transfer mode values of SET FEATURES 03h: a class plus a mode number. */
#define ATA_XFER_PIO_DEFAULT 0x00
#define ATA_XFER_PIO         0x08
#define ATA_XFER_MWDMA       0x20
#define ATA_XFER_UDMA        0x40
#define ATA_XFER_CLASS_MASK  0xf8
#define ATA_XFER_MODE_MASK   0x07

/* CHECK POWER MODE result in the Sector Count: active or idle. */
#define ATA_POWER_ACTIVE 0xff

/* IDENTIFY DEVICE: 256 little-endian words; the words a driver reads. */
#define ATA_ID_WORDS 256
enum {
    ATA_ID_CONFIG           = 0,
    ATA_ID_CYLS             = 1,
    ATA_ID_HEADS            = 3,
    ATA_ID_SECTORS          = 6,
    ATA_ID_SERNO            = 10,   /* 20 characters, words 10-19 */
    ATA_ID_FW_REV           = 23,   /* 8 characters, words 23-26 */
    ATA_ID_PROD             = 27,   /* 40 characters, words 27-46 */
    ATA_ID_MAX_MULTSECT     = 47,
    ATA_ID_CAPABILITY       = 49,
    ATA_ID_CAPABILITY_2     = 50,
    ATA_ID_OLD_PIO_MODES    = 51,
    ATA_ID_FIELD_VALID      = 53,
    ATA_ID_CUR_CYLS         = 54,
    ATA_ID_CUR_HEADS        = 55,
    ATA_ID_CUR_SECTORS      = 56,
    ATA_ID_CUR_CAPACITY     = 57,   /* 2 words */
    ATA_ID_MULTSECT         = 59,
    ATA_ID_LBA_CAPACITY     = 60,   /* 2 words: LBA28 sectors */
    ATA_ID_MWDMA_MODES      = 63,
    ATA_ID_PIO_MODES        = 64,
    ATA_ID_EIDE_DMA_MIN     = 65,
    ATA_ID_EIDE_DMA_TIME    = 66,
    ATA_ID_EIDE_PIO         = 67,
    ATA_ID_EIDE_PIO_IORDY   = 68,
    ATA_ID_QUEUE_DEPTH      = 75,
    ATA_ID_MAJOR_VER        = 80,
    ATA_ID_MINOR_VER        = 81,
    ATA_ID_COMMAND_SET_1    = 82,
    ATA_ID_COMMAND_SET_2    = 83,
    ATA_ID_CFSSE            = 84,   /* command set/feature supported ext. */
    ATA_ID_CFS_ENABLE_1     = 85,
    ATA_ID_CFS_ENABLE_2     = 86,
    ATA_ID_CSF_DEFAULT      = 87,
    ATA_ID_UDMA_MODES       = 88,
    ATA_ID_HW_CONFIG        = 93,
    ATA_ID_LBA_CAPACITY_2   = 100,  /* 4 words: LBA48 sectors */
    ATA_ID_SECTOR_SIZE      = 106,
    ATA_ID_INTEGRITY        = 255,
};
#define ATA_ID_SERNO_LEN  20
#define ATA_ID_FW_REV_LEN 8
#define ATA_ID_PROD_LEN   40

/* Words 82 and 85: supported / enabled. */
#define ATA_ID_CS1_PM         (1 << 3)  /* power management feature set */
#define ATA_ID_CS1_WCACHE     (1 << 5)  /* volatile write cache */
#define ATA_ID_CS1_LOOKAHEAD  (1 << 6)
/* Words 83 and 86: supported / enabled. */
#define ATA_ID_CS2_LBA48      (1 << 10)
#define ATA_ID_CS2_FLUSH      (1 << 12) /* FLUSH CACHE */
#define ATA_ID_CS2_FLUSH_EXT  (1 << 13) /* FLUSH CACHE EXT */
/* Words 84 and 87: supported / enabled. */
#define ATA_ID_CSE_FUA        (1 << 6)  /* WRITE DMA/MULTIPLE FUA EXT */
/* Words 83, 84 and 87 hold 01b in bits 15:14 when they are valid. */
#define ATA_ID_VALID_01       (1 << 14)
/* Word 49. */
#define ATA_ID_CAP_DMA        (1 << 8)
#define ATA_ID_CAP_LBA        (1 << 9)
#define ATA_ID_CAP_IORDY      (1 << 11)
/* Word 255: signature in bits 7:0, checksum in bits 15:8. */
#define ATA_ID_INTEGRITY_SIG  0xa5

/* LBA28 addresses 2^28 sectors; LBA48 counts up to 65536 sectors. */
#define ATA_LBA28_MAX_SECTORS (1u << 28)
#define ATA_LBA28_MAX_COUNT   256
#define ATA_LBA48_MAX_COUNT   65536

/*
 * Bus-master IDE registers, by offset from the channel's block (8 bytes
 * per channel in the BMIBA I/O space).
 */
enum {
    BM_REG_COMMAND = 0,     /* 8 bits */
    BM_REG_STATUS  = 2,     /* 8 bits */
    BM_REG_PRDT    = 4,     /* 32 bits: PRD table address */
    BM_REG_COUNT   = 8,
};
#define BM_CMD_START      0x01  /* start/stop bus master */
#define BM_CMD_READ       0x08  /* direction: device to memory */
#define BM_STATUS_ACTIVE  0x01  /* transfer in progress (read only) */
#define BM_STATUS_ERROR   0x02  /* DMA failed (write 1 to clear) */
#define BM_STATUS_INTR    0x04  /* device raised INTRQ (write 1 to clear) */
#define BM_STATUS_DMA_CAP(unit) (0x20 << (unit)) /* set by the BIOS */
#define BM_STATUS_SIMPLEX 0x80

/*
 * A Physical Region Descriptor: one buffer of a DMA transfer, in guest
 * memory, little-endian.  A byte count of 0 means 64 KiB; the last
 * descriptor of a table has ATA_PRD_EOT set.  A table is at most 64 KiB
 * (8192 descriptors): it may not cross a 64 KiB boundary.
 */
typedef struct ATAPrd {
    uint32_t addr;
    uint16_t count;
    uint16_t flags;
} QEMU_PACKED ATAPrd;
_Static_assert(sizeof(ATAPrd) == 8, "a PRD is two dwords");
_Static_assert(offsetof(ATAPrd, count) == 4, "byte count in dword 1");
#define ATA_PRD_EOT        0x8000
#define ATA_PRD_MAX_BYTES  (64 * KiB)
#define ATA_PRD_TABLE_MAX  (64 * KiB / sizeof(ATAPrd))

#endif
