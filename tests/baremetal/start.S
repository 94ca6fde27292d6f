// Entry point and exception vectors of the bare-metal test images
// (tests/baremetal). QEMU's -kernel loader enters _start at EL1 with the MMU
// and caches off and interrupts masked.
//
// Only what C cannot do for itself: a stack, zeroed .bss, FP/SIMD access
// (CPACR_EL1.FPEN resets to "trap", and both hal_copy_memcpy and compiled
// code use q registers), and a vector table so that a fault (an unaligned
// access on Device memory, a bad pointer) prints its syndrome and powers
// the machine off instead of hanging until the ctest timeout.
    .section .text.boot, "ax"
    .global _start
    .type _start, %function
_start:
    msr     daifset, #0xf
    adrp    x1, __stack_top
    add     x1, x1, :lo12:__stack_top
    mov     sp, x1

    // .bss is 16-byte aligned and sized (linker script). The MMU is off, so
    // every data access is Device memory: keep the stores aligned.
    adrp    x1, __bss_start
    add     x1, x1, :lo12:__bss_start
    adrp    x2, __bss_end
    add     x2, x2, :lo12:__bss_end
1:  cmp     x1, x2
    b.hs    2f
    stp     xzr, xzr, [x1], #16
    b       1b
2:
    mrs     x1, cpacr_el1
    orr     x1, x1, #(3 << 20)
    msr     cpacr_el1, x1
    isb

    adrp    x1, bm_vectors
    add     x1, x1, :lo12:bm_vectors
    msr     vbar_el1, x1
    isb

    mov     x29, xzr
    mov     x30, xzr
    bl      bm_main
    // bm_main powers off; if PSCI returns, park.
3:  wfi
    b       3b
    .size _start, . - _start

// 16 entries of 0x80 bytes; every one reports and stops. x0 = entry index.
    .section .text.vectors, "ax"
    .p2align 11
    .global bm_vectors
bm_vectors:
    .set entry, 0
    .rept 16
    .p2align 7
    mov     x0, #entry
    mrs     x1, esr_el1
    mrs     x2, elr_el1
    mrs     x3, far_el1
    b       bm_exception
    .set entry, entry + 1
    .endr
