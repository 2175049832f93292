"""The Makefile rules of the board program: ``make board-test``, ``make size``.

Each source is compiled to its own object under ``build/<board>/`` so that ``size`` can
report the runtime glue (``startup.c``, ``board_main.c``, ``runtime/src/standalone.c``),
the kernels (``codegen/host/src/lib*.c``), the model (the run function and its constants,
``ember_<mod>_interface.c``, and the metadata) and the embedded test vectors separately.
The program links against newlib's libc and libm only (``-nostartfiles``, no syscalls: the
board talks to the host by semihosting), and QEMU runs under ``timeout``.
"""

from __future__ import annotations

from ember.tools.cortexm.boards import BOARDS, board_for, mcpu_of

__all__ = ["BOARD_GROUPS", "board_rules"]

#: object groups of ``make size`` (make variable -> what it holds)
BOARD_GROUPS = {
    "GLUE_OBJS": "runtime glue",
    "KERNEL_OBJS": "kernels",
    "MODEL_OBJS": "model (run function, constants)",
    "VECTOR_OBJS": "test vectors",
}


def board_rules(cflags: str, have_vectors: bool) -> str:
    """Makefile rules for the board that runs ``cflags``' CPU ('' when there is none)."""
    board = board_for(mcpu_of(cflags))
    if board is None:
        return ""
    flags = " ".join(f for f in cflags.split() if not f.startswith("-l"))
    machines = []
    for b in BOARDS.values():
        machines += [f"ifeq ($(BOARD),{b.name})", f"QEMU_CPU := {b.qemu_cpu}", "endif"]
    vectors = "boards/common/vectors.S" if have_vectors else ""
    return "\n".join(
        [
            "",
            f"# --- the Cortex-M board: make board-test [BOARD={board.name}], make size ---",
            f"BOARD ?= {board.name}",
            "ARM_CC ?= arm-none-eabi-gcc",
            "ARM_SIZE ?= arm-none-eabi-size",
            "QEMU ?= qemu-system-arm",
            "QEMU_TIMEOUT ?= 600",
            "BOARD_RUNS ?= 1",
            *machines,
            f"BOARD_CFLAGS ?= -std=c11 {flags} -ffunction-sections -fdata-sections",
            "BOARD_LDFLAGS ?= -nostartfiles --specs=nano.specs -Wl,--gc-sections",
            "BOARD_LDLIBS ?= -lm -lc -lgcc",
            "B := build/$(BOARD)",
            "GLUE_SRCS := boards/common/startup.c boards/common/board_main.c "
            "runtime/src/standalone.c",
            "KERNEL_SRCS := $(wildcard codegen/host/src/lib*.c)",
            "MODEL_SRCS := $(filter-out $(KERNEL_SRCS),$(wildcard codegen/host/src/*.c))",
            f"VECTOR_SRCS := {vectors}",
            "objs = $(addprefix $(B)/,$(addsuffix .o,$(basename $(notdir $(1)))))",
            "GLUE_OBJS := $(call objs,$(GLUE_SRCS))",
            "KERNEL_OBJS := $(call objs,$(KERNEL_SRCS))",
            "MODEL_OBJS := $(call objs,$(MODEL_SRCS))",
            "VECTOR_OBJS := $(call objs,$(VECTOR_SRCS))",
            "BOARD_OBJS := $(GLUE_OBJS) $(KERNEL_OBJS) $(MODEL_OBJS) $(VECTOR_OBJS)",
            "vpath %.c boards/common codegen/host/src runtime/src",
            "vpath %.S boards/common",
            "",
            "$(B)/%.o: %.c | $(B)",
            "\t$(ARM_CC) $(BOARD_CFLAGS) -DEMBER_BOARD_RUNS=$(BOARD_RUNS) $(INCLUDES) "
            "-Iboards/common -c -o $@ $<",
            "",
            "$(B)/%.o: %.S $(wildcard test/*.bin) | $(B)",
            "\t$(ARM_CC) $(BOARD_CFLAGS) -c -o $@ $<",
            "",
            "$(B):",
            "\tmkdir -p $@",
            "",
            "# a new BOARD_RUNS rebuilds the runner",
            "$(B)/board_main.o: $(B)/runs-$(BOARD_RUNS)",
            "$(B)/runs-$(BOARD_RUNS): | $(B)",
            "\trm -f $(B)/runs-* && touch $@",
            "",
            "$(B)/run_model.elf: $(BOARD_OBJS) boards/$(BOARD)/link.ld",
            "\t$(ARM_CC) $(BOARD_CFLAGS) $(BOARD_LDFLAGS) -T boards/$(BOARD)/link.ld -o $@ "
            "$(BOARD_OBJS) $(BOARD_LDLIBS)",
            "",
            "board: $(B)/run_model.elf",
            "",
            "board-objects: $(BOARD_OBJS)",
            "",
            "board-test: $(B)/run_model.elf",
            "\ttimeout $(QEMU_TIMEOUT) $(QEMU) -machine $(BOARD) -cpu $(QEMU_CPU) -nographic "
            "-monitor none -serial none -chardev stdio,id=semihosting "
            "-semihosting-config enable=on,target=native,chardev=semihosting -kernel $<",
            "",
            "size: $(B)/run_model.elf",
            *(
                f'\t@echo "{label}:" && $(ARM_SIZE) -t $({var}) | tail -n 1'
                for var, label in BOARD_GROUPS.items()
                if var != "VECTOR_OBJS" or have_vectors
            ),
            '\t@echo "linked program (with libc, libm):" && $(ARM_SIZE) $<',
            "",
            "board-print-objects:",
            *(f'\t@echo "{var}=$({var})"' for var in BOARD_GROUPS),
            '\t@echo "ELF=$(B)/run_model.elf"',
            "",
            ".PHONY: board board-objects board-print-objects board-test size",
            "",
        ]
    )
