/*
 * Arm semihosting, the few calls a board program needs (no newlib syscalls, no rdimon):
 * write a string to the host's console, read the host's clock, exit with a status. A
 * debugger or QEMU (`-semihosting`) serves them; on a board without one they stop at the
 * BKPT instruction.
 */
#ifndef EMBER_SEMIHOST_H_
#define EMBER_SEMIHOST_H_

#include <stdint.h>

#define EMBER_SYS_WRITE0 0x04
#define EMBER_SYS_CLOCK 0x10
#define EMBER_SYS_EXIT 0x18
/* SYS_EXIT reasons: the application exited (QEMU exits 0), a run-time error (QEMU exits 1) */
#define EMBER_ADP_APPLICATION_EXIT 0x20026
#define EMBER_ADP_RUNTIME_ERROR 0x20023

static inline int32_t ember_semihost(int32_t op, const void* arg) {
  register int32_t r0 __asm("r0") = op;
  register const void* r1 __asm("r1") = arg;
  __asm volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

static inline void ember_semihost_write(const char* text) {
  ember_semihost(EMBER_SYS_WRITE0, text);
}

/* centiseconds since the program started */
static inline int32_t ember_semihost_clock(void) { return ember_semihost(EMBER_SYS_CLOCK, 0); }

static inline __attribute__((noreturn)) void ember_semihost_exit(int status) {
  uintptr_t reason = status == 0 ? EMBER_ADP_APPLICATION_EXIT : EMBER_ADP_RUNTIME_ERROR;
  ember_semihost(EMBER_SYS_EXIT, (const void*)reason);
  for (;;) {
  }
}

#endif /* EMBER_SEMIHOST_H_ */
