/*
 * ember board startup for Arm Cortex-M (ARMv6-M, ARMv7-M, ARMv8-M): the vector table, a reset
 * handler that enables the FPU (when the build uses one), copies .data from flash, zeroes
 * .bss and calls main, and fault handlers that report through semihosting and exit instead
 * of spinning. The symbols come from the board's link.ld.
 */
#include <stdint.h>

#include "semihost.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_top[];
int main(void);

void Reset_Handler(void) {
#if defined(__ARM_FP)
  /* CPACR: full access to coprocessors 10 and 11 (the FPU) before any float instruction */
  *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20;
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
  for (uint32_t *src = __data_load, *dst = __data_start; dst < __data_end;) *dst++ = *src++;
  for (uint32_t* dst = __bss_start; dst < __bss_end;) *dst++ = 0;
  ember_semihost_exit(main());
}

static void Fault_Handler(void) {
  ember_semihost_write("FAIL: processor fault (hard fault, bus fault or usage fault)\n");
  ember_semihost_exit(3);
}

typedef void (*ember_vector)(void);

__attribute__((section(".vectors"), used)) const ember_vector ember_vector_table[16] = {
    (ember_vector)(uintptr_t)__stack_top, /* initial stack pointer */
    Reset_Handler,
    Fault_Handler, /* NMI */
    Fault_Handler, /* HardFault */
    Fault_Handler, /* MemManage */
    Fault_Handler, /* BusFault */
    Fault_Handler, /* UsageFault */
    0, 0, 0, 0,
    Fault_Handler, /* SVCall */
    Fault_Handler, /* DebugMonitor */
    0,
    Fault_Handler, /* PendSV */
    Fault_Handler, /* SysTick */
};
