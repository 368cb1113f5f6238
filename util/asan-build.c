/*
 * What the AddressSanitizer build (./configure --enable-asan) adds to every
 * program linked with libqblock; other builds compile nothing here.
 *
 * 1. ASan's default options.  That build stops at UndefinedBehaviorSanitizer's
 *    first finding with a trap instruction (meson.build says why);
 *    handle_sigill=1 has ASan report the SIGILL with the stack and the
 *    line that trapped, where the process would otherwise die without a
 *    word.  ASAN_OPTIONS in the environment still adds to these and wins.
 *
 * 2. A shorter exit.  LeakSanitizer's check at exit reads every writable
 *    segment of every module for pointers, the sanitizer runtime's own
 *    4.7 MB of data too, most of it zeroed pages never touched before: a
 *    page fault for each page, 1,200 of them.  madvise(MADV_POPULATE_READ)
 *    maps them in one call first (Linux 5.14; older kernels refuse it and
 *    the check faults as before), 7 ms less at the end of every program.
 *    The test layers start thousands of them under ASan.  The destructor
 *    runs before the check: glibc runs the executable's destructors from
 *    an exit handler registered after the one of LeakSanitizer, and exit
 *    handlers run last registered first.
 */
#include "config-host.h"

#ifdef CONFIG_UBSAN_TRAP

#include "util/osdep.h"

#include <link.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
    return "handle_sigill=1";
}

static int populate_sanitizer_data(struct dl_phdr_info *info, size_t size,
                                   void *opaque)
{
    uintptr_t page = sysconf(_SC_PAGESIZE);

    if (!strstr(info->dlpi_name, "/libasan.so")) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start, end;

        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) {
            continue;
        }
        start = QEMU_ALIGN_DOWN(info->dlpi_addr + ph->p_vaddr, page);
        end = QEMU_ALIGN_UP(info->dlpi_addr + ph->p_vaddr + ph->p_memsz, page);
        madvise((void *)start, end - start, MADV_POPULATE_READ);
    }
    return 1;
}

__attribute__((destructor)) static void populate_before_leak_check(void)
{
    dl_iterate_phdr(populate_sanitizer_data, NULL);
}

#endif
