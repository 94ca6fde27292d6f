// Entry point of firmware.elf: the first instructions after QEMU's -kernel
// loader jumps here at EL1 with the MMU and caches off, interrupts masked
// and x0 = 0 (no DTB pointer: the platform DTB is found at the start of RAM).
//
// It does only what C cannot do for itself: a stack, zeroed .bss/.tbss,
// FP/SIMD access (picolibc's string routines and Debian's libfdt.a and
// libprotobuf-c.a use SIMD registers, and CPACR_EL1.FPEN resets to "trap"),
// the exception vector base, picolibc's TLS pointer, the stack-protector
// guard, and fw_entry_ticks (the counter at the first instruction, for the
// boot-time report). The guard is set here, before the first C function, because a
// function that changes the guard while its own canary is live fails its
// check on return. Secondary cores are held off by QEMU's PSCI model until
// core 0 starts them with CPU_ON at _secondary_start, below.
// The CFI marks _start and _secondary_start as outermost frames (x30 has no
// caller), so gdb's backtrace ends here instead of unwinding garbage; it goes
// to .debug_frame like the C code's (see cmake/aarch64-baremetal.cmake).
    .cfi_sections .debug_frame
    .section .text.boot, "ax"
    .global _start
    .type _start, %function
_start:
    .cfi_startproc
    .cfi_undefined x30
    msr     daifset, #0xf
    // TPIDR_EL1 holds the core index (fw::smp::this_core); core 0 here.
    msr     tpidr_el1, xzr
    // Contract: EL1. Anything else cannot run this image; stop quietly
    // (there is no console yet to complain on).
    mrs     x1, CurrentEL
    cmp     x1, #(1 << 2)
    b.ne    .Lpark

    // Two stacks: SP_EL1 for exceptions and IRQs, SP_EL0 for everything
    // else (the core then runs in EL1t; see boot/firmware.ld).
    msr     spsel, #1
    adrp    x1, __exception_stack_top
    add     x1, x1, :lo12:__exception_stack_top
    mov     sp, x1
    msr     spsel, #0
    adrp    x1, __boot_stack_top
    add     x1, x1, :lo12:__boot_stack_top
    mov     sp, x1

    // Zero .bss and .tbss. Both are 16-byte aligned and sized (linker
    // script), so 16-byte stores cover them exactly. The MMU is off, so all
    // data accesses are Device-nGnRnE: keep them aligned.
    adrp    x1, __bss_start
    add     x1, x1, :lo12:__bss_start
    adrp    x2, __bss_end
    add     x2, x2, :lo12:__bss_end
    bl      .Lzero
    adrp    x1, __tbss_start
    add     x1, x1, :lo12:__tbss_start
    adrp    x2, __tbss_end
    add     x2, x2, :lo12:__tbss_end
    bl      .Lzero

    // CPACR_EL1.FPEN = 0b11: no trapping of FP/SIMD at EL1/EL0.
    mrs     x1, cpacr_el1
    orr     x1, x1, #(3 << 20)
    msr     cpacr_el1, x1
    isb

    adrp    x1, fw_vectors
    add     x1, x1, :lo12:fw_vectors
    msr     vbar_el1, x1
    isb
    // SErrors (asynchronous aborts) are taken from here on and panic; IRQs
    // stay masked until the GIC and handlers are set up.
    msr     daifclr, #4

    // picolibc's local-exec TLS: TP points 16 bytes (or the TLS alignment)
    // before the TLS block.
    adrp    x1, __tls_base
    add     x1, x1, :lo12:__tls_base
    ldr     x2, =__arm64_tls_tcb_offset
    sub     x1, x1, x2
    msr     tpidr_el0, x1
    isb

    // Stack-protector guard from the virtual counter: boot time in ticks
    // differs run to run; spread it over all 64 bits (a multiply by an odd
    // constant and a rotate) and clear the low byte so a string overflow
    // that writes a NUL terminator cannot forge it.
    mrs     x1, cntvct_el0
    adrp    x2, fw_entry_ticks
    str     x1, [x2, :lo12:fw_entry_ticks]
    ldr     x2, =0x9e3779b97f4a7c15
    mul     x1, x1, x2
    ror     x2, x1, #29
    eor     x1, x1, x2
    and     x1, x1, #~0xff
    adrp    x2, __stack_chk_guard
    str     x1, [x2, :lo12:__stack_chk_guard]

    mov     x29, xzr
    mov     x30, xzr
    bl      fw_main
.Lpark:
    wfi
    b       .Lpark

// Zeroes [x1, x2) in 16-byte steps; x1 and x2 16-byte aligned.
.Lzero:
    cmp     x1, x2
    b.hs    1f
    stp     xzr, xzr, [x1], #16
    b       .Lzero
1:  ret
    .cfi_endproc
    .size _start, . - _start
    .ltorg

// Secondary cores, entered from PSCI CPU_ON at EL1 with the MMU and caches
// off and x0 = the context id core 0 passed: the address of its
// fw::smp SecondaryBoot record { exception_sp, sp, tp, core } (8-byte
// fields, aligned, so Device-memory loads before the MMU is on are fine).
// Same register setup as core 0 minus what core 0 already did for the whole
// chip (.bss, the stack-protector guard); then C on its own stack.
    .global _secondary_start
    .type _secondary_start, %function
_secondary_start:
    .cfi_startproc
    .cfi_undefined x30
    msr     daifset, #0xf
    mov     x19, x0
    ldp     x1, x2, [x19, #0]
    msr     spsel, #1
    mov     sp, x1
    msr     spsel, #0
    mov     sp, x2
    ldp     x1, x2, [x19, #16]
    msr     tpidr_el0, x1
    msr     tpidr_el1, x2
    mrs     x1, cpacr_el1
    orr     x1, x1, #(3 << 20)
    msr     cpacr_el1, x1
    adrp    x1, fw_vectors
    add     x1, x1, :lo12:fw_vectors
    msr     vbar_el1, x1
    isb
    msr     daifclr, #4
    mov     x0, x19
    mov     x29, xzr
    mov     x30, xzr
    bl      fw_secondary_main
1:  wfi
    b       1b
    .cfi_endproc
    .size _secondary_start, . - _secondary_start
