// hal_copy_memcpy: the chip's optimised copy (AArch64, FP/SIMD q registers).
//
//   void* hal_copy_memcpy(void* dst, const void* src, size_t n);  // returns dst
//
// The C memcpy contract: ranges must not overlap. It is what CpuEngine
// (hal/copy.h) copies DMA descriptors with, and it can also serve as the
// firmware's general memcpy. Picolibc as Debian builds it for aarch64 has
// only the size-optimised byte loop (memcpy-stub.c: four instructions per
// byte), and under QEMU TCG the cost of a copy is roughly the number of
// guest instructions plus one TLB lookup per memory access, so moving 64
// bytes with four LDP/STP of q registers (16 eight-byte accesses, 6
// instructions) instead of 64 byte loads and stores (256 instructions) is
// what makes the difference. tests/baremetal measures both.
//
// Shape:
//  - n <= 64: no loop. Two possibly overlapping accesses, one from each end
//    of the range, cover every size in a class: 1..3 bytes (first, middle,
//    last byte), 4..7 (two words), 8..16 (two doublewords), 17..32 (two q),
//    33..64 (two q pairs). Overlapping stores write the same bytes twice.
//  - n > 64: store the first 16 bytes unaligned, advance both pointers to
//    the next 16-byte boundary of dst, copy 64 bytes per iteration with
//    16-byte-aligned stores, then copy the last 64 bytes of the range from
//    its end (overlapping what the loop already wrote). Loads stay
//    unaligned; the source and destination alignments are independent.
//
// Preconditions (the firmware builds C/C++ with -mstrict-align because code
// may run before the MMU is on, when every data access is Device memory and
// unaligned accesses fault; this routine deliberately does not follow that
// rule):
//  - the MMU is on and both ranges are mapped Normal memory (RAM, HBM, BAR2
//    as mapped by fw::mmu), where unaligned LDR/STR and LDP/STP of q
//    registers are architecturally permitted;
//  - SCTLR_EL1.A = 0 (no alignment checking; fw::mmu leaves it clear);
//  - CPACR_EL1.FPEN allows FP/SIMD at EL1 (boot/start.S sets it).
// Clobbers only caller-saved registers (x3-x9, q0-q3), so it is safe to
// call from C, and it uses no stack.
//
// Using it as the firmware's memcpy: link the firmware with
// -Wl,--defsym=memcpy=hal_copy_memcpy. The symbol is then defined before
// libc.a is searched, so picolibc's memcpy.o is never pulled in and every
// call, including the ones GCC emits for struct copies, lands here
// (picolibc.specs uses the same mechanism to select vfprintf). That is only
// sound if nothing calls memcpy before the MMU is enabled: a 5-byte copy
// here is two overlapping, unaligned 4-byte accesses, which fault on Device
// memory. Code that must copy earlier should use an explicit byte loop.
    .section .text.hal_copy_memcpy, "ax", %progbits
    .global hal_copy_memcpy
    .type hal_copy_memcpy, %function
    .p2align 6
hal_copy_memcpy:
    add     x4, x1, x2              // src end
    add     x5, x0, x2              // dst end
    cmp     x2, #16
    b.ls    .Lupto16
    cmp     x2, #64
    b.hi    .Llarge
    cmp     x2, #32
    b.hi    .L33to64
    // 17..32 bytes: first 16 and last 16.
    ldr     q0, [x1]
    ldr     q1, [x4, #-16]
    str     q0, [x0]
    str     q1, [x5, #-16]
    ret
.L33to64:
    // 33..64 bytes: first 32 and last 32.
    ldp     q0, q1, [x1]
    ldp     q2, q3, [x4, #-32]
    stp     q0, q1, [x0]
    stp     q2, q3, [x5, #-32]
    ret
.Lupto16:
    cmp     x2, #8
    b.lo    .Lupto7
    // 8..16 bytes: first 8 and last 8.
    ldr     x6, [x1]
    ldr     x7, [x4, #-8]
    str     x6, [x0]
    str     x7, [x5, #-8]
    ret
.Lupto7:
    cmp     x2, #4
    b.lo    .Lupto3
    // 4..7 bytes: first 4 and last 4.
    ldr     w6, [x1]
    ldr     w7, [x4, #-4]
    str     w6, [x0]
    str     w7, [x5, #-4]
    ret
.Lupto3:
    cbz     x2, .Lreturn
    // 1..3 bytes: byte 0, byte n/2, byte n-1 (n=1: 0,0,0; 2: 0,1,1; 3: 0,1,2).
    lsr     x8, x2, #1
    ldrb    w6, [x1]
    ldrb    w9, [x1, x8]
    ldrb    w7, [x4, #-1]
    strb    w6, [x0]
    strb    w9, [x0, x8]
    strb    w7, [x5, #-1]
.Lreturn:
    ret

.Llarge:
    // n > 64. Head: 16 bytes at dst, unaligned; then skip to the next
    // 16-byte boundary of dst (0..15 bytes on), re-copying at most 15 of
    // those bytes in the loop.
    ldr     q0, [x1]
    neg     x6, x0
    and     x6, x6, #15
    add     x1, x1, x6
    add     x3, x0, x6              // x3: 16-byte aligned dst cursor
    sub     x2, x2, x6              // bytes left from the cursor, > 48
    str     q0, [x0]
    subs    x2, x2, #64             // x2 = left - 64
    b.ls    .Ltail64                // left <= 64: the tail covers it
.Lloop64:
    ldp     q0, q1, [x1], #32
    ldp     q2, q3, [x1], #32
    stp     q0, q1, [x3], #32
    stp     q2, q3, [x3], #32
    subs    x2, x2, #64
    b.hi    .Lloop64
.Ltail64:
    // The last 64 bytes of the range (1..64 of them not yet copied).
    ldp     q0, q1, [x4, #-64]
    ldp     q2, q3, [x4, #-32]
    stp     q0, q1, [x5, #-64]
    stp     q2, q3, [x5, #-32]
    ret
    .size hal_copy_memcpy, . - hal_copy_memcpy
