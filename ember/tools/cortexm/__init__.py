"""Arm Cortex-M boards for Model Library Format tars: startup code, linker scripts, a program.

An MLF tar built for an M-profile ``c`` target (``c -mcpu=cortex-m4``) ships
``boards/<board>/`` (``link.ld`` for the board's memory map), ``boards/common/``
(``startup.c``, ``semihost.h``, ``board_main.c`` and ``vectors.S``, which embeds the test
vectors with ``.incbin``) and Makefile rules: ``make board-test`` cross-compiles with
``arm-none-eabi-gcc`` and runs the program under ``qemu-system-arm -semihosting``, which
prints PASS or FAIL and exits with the program's status; ``make size`` prints
``.text``/``.data``/``.bss`` of the runtime glue, the kernels and the model (constants and
run function) separately. :func:`size_report` returns those numbers.
"""

from ember.tools.cortexm.boards import BOARDS, Board, board_files, board_for
from ember.tools.cortexm.rules import board_rules
from ember.tools.cortexm.size import SectionSizes, size_report

__all__ = [
    "BOARDS",
    "Board",
    "SectionSizes",
    "board_files",
    "board_for",
    "board_rules",
    "size_report",
]
