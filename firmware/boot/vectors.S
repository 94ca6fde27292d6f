// EL1 exception vector table (VBAR_EL1): all 16 entries.
//
// The firmware runs in EL1t (SP_EL0 = boot stack), so its exceptions and
// IRQs arrive at the "current EL, SP_EL0" entries and run on SP_EL1, the
// exception stack; the SP_ELx entries only fire for a fault inside a
// handler. Every entry saves the complete interrupted context into an
// ExceptionFrame on the exception stack (layout in core/include/fw/exceptions.h, checked there
// with static_asserts) and calls fw_exception(frame, kind) with kind = the
// entry's index 0..15. The FP/SIMD registers are saved too: the compiler may
// use q registers anywhere (memcpy, struct copies), in the handler and in the
// code it interrupted alike. fw_exception returns only for IRQs; the frame is
// then restored (ELR/SPSR included) and the core returns with eret.
    .equ FRAME_SIZE, 816
    .equ OFF_SP, 248
    .equ OFF_ELR, 256
    .equ OFF_ESR, 272
    .equ OFF_FPSR, 288
    .equ OFF_Q, 304

.macro VENTRY kind
    .balign 0x80
    sub     sp, sp, #FRAME_SIZE
    stp     x0, x1, [sp, #0]
    mov     x1, #\kind
    b       fw_exception_common
.endm

    .section .text.vectors, "ax"
    .balign 0x800
    .global fw_vectors
fw_vectors:
    VENTRY 0   // current EL, SP_EL0: sync (the firmware's normal mode)
    VENTRY 1   //                     IRQ
    VENTRY 2   //                     FIQ
    VENTRY 3   //                     SError
    VENTRY 4   // current EL, SP_ELx: sync
    VENTRY 5   //                     IRQ
    VENTRY 6   //                     FIQ
    VENTRY 7   //                     SError
    VENTRY 8   // lower EL, AArch64:  sync
    VENTRY 9   //                     IRQ
    VENTRY 10  //                     FIQ
    VENTRY 11  //                     SError
    VENTRY 12  // lower EL, AArch32:  sync
    VENTRY 13  //                     IRQ
    VENTRY 14  //                     FIQ
    VENTRY 15  //                     SError

    .balign 16
fw_exception_common:
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    str     x30, [sp, #240]
    // Interrupted SP: SP_EL0 for entries 0-3, else the exception stack
    // itself as it was before this frame.
    mrs     x2, sp_el0
    cmp     x1, #4
    add     x3, sp, #FRAME_SIZE
    csel    x2, x2, x3, lo
    str     x2, [sp, #OFF_SP]
    mrs     x2, elr_el1
    mrs     x3, spsr_el1
    stp     x2, x3, [sp, #OFF_ELR]
    mrs     x2, esr_el1
    mrs     x3, far_el1
    stp     x2, x3, [sp, #OFF_ESR]
    mrs     x2, fpsr
    mrs     x3, fpcr
    stp     x2, x3, [sp, #OFF_FPSR]
    stp     q0, q1, [sp, #(OFF_Q + 0 * 32)]
    stp     q2, q3, [sp, #(OFF_Q + 1 * 32)]
    stp     q4, q5, [sp, #(OFF_Q + 2 * 32)]
    stp     q6, q7, [sp, #(OFF_Q + 3 * 32)]
    stp     q8, q9, [sp, #(OFF_Q + 4 * 32)]
    stp     q10, q11, [sp, #(OFF_Q + 5 * 32)]
    stp     q12, q13, [sp, #(OFF_Q + 6 * 32)]
    stp     q14, q15, [sp, #(OFF_Q + 7 * 32)]
    stp     q16, q17, [sp, #(OFF_Q + 8 * 32)]
    stp     q18, q19, [sp, #(OFF_Q + 9 * 32)]
    stp     q20, q21, [sp, #(OFF_Q + 10 * 32)]
    stp     q22, q23, [sp, #(OFF_Q + 11 * 32)]
    stp     q24, q25, [sp, #(OFF_Q + 12 * 32)]
    stp     q26, q27, [sp, #(OFF_Q + 13 * 32)]
    stp     q28, q29, [sp, #(OFF_Q + 14 * 32)]
    stp     q30, q31, [sp, #(OFF_Q + 15 * 32)]

    mov     x0, sp
    mov     x29, xzr
    bl      fw_exception

    ldp     q0, q1, [sp, #(OFF_Q + 0 * 32)]
    ldp     q2, q3, [sp, #(OFF_Q + 1 * 32)]
    ldp     q4, q5, [sp, #(OFF_Q + 2 * 32)]
    ldp     q6, q7, [sp, #(OFF_Q + 3 * 32)]
    ldp     q8, q9, [sp, #(OFF_Q + 4 * 32)]
    ldp     q10, q11, [sp, #(OFF_Q + 5 * 32)]
    ldp     q12, q13, [sp, #(OFF_Q + 6 * 32)]
    ldp     q14, q15, [sp, #(OFF_Q + 7 * 32)]
    ldp     q16, q17, [sp, #(OFF_Q + 8 * 32)]
    ldp     q18, q19, [sp, #(OFF_Q + 9 * 32)]
    ldp     q20, q21, [sp, #(OFF_Q + 10 * 32)]
    ldp     q22, q23, [sp, #(OFF_Q + 11 * 32)]
    ldp     q24, q25, [sp, #(OFF_Q + 12 * 32)]
    ldp     q26, q27, [sp, #(OFF_Q + 13 * 32)]
    ldp     q28, q29, [sp, #(OFF_Q + 14 * 32)]
    ldp     q30, q31, [sp, #(OFF_Q + 15 * 32)]
    ldp     x2, x3, [sp, #OFF_FPSR]
    msr     fpsr, x2
    msr     fpcr, x3
    ldp     x2, x3, [sp, #OFF_ELR]
    msr     elr_el1, x2
    msr     spsr_el1, x3
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x19, [sp, #144]
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
    ldr     x30, [sp, #240]
    ldp     x0, x1, [sp, #0]
    add     sp, sp, #FRAME_SIZE
    eret
