"""ember.config: typed settings read once from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember import config as cfg
from ember.errors import EmberValueError


def test_defaults_and_overrides():
    default = cfg.config_from({})
    assert default.cc == "cc" and default.num_threads == 0
    assert default.cache_dir == Path("~/.cache/ember").expanduser()
    custom = cfg.config_from({"CC": "clang", "EMBER_NUM_THREADS": "3", "EMBER_CACHE_DIR": "/x"})
    assert custom.cc == "clang" and custom.num_threads == 3 and custom.cache_dir == Path("/x")


def test_bad_values_say_how_to_fix():
    with pytest.raises(EmberValueError, match="EMBER_NUM_THREADS must be an integer"):
        cfg.config_from({"EMBER_NUM_THREADS": "many"})
    with pytest.raises(EmberValueError, match=">= 0"):
        cfg.config_from({"EMBER_NUM_THREADS": "-1"})


def test_config_is_read_once_and_described():
    assert cfg.config() is cfg.config()
    text = cfg.describe()
    for setting in cfg.SETTINGS.values():
        assert setting.env in text


def test_ffi_accel_flag():
    assert cfg.config_from({}).ffi_accel is True
    for off in ("0", "false", "OFF", "no"):
        assert cfg.config_from({"EMBER_FFI_ACCEL": off}).ffi_accel is False
    assert cfg.config_from({"EMBER_FFI_ACCEL": "1"}).ffi_accel is True


def test_runtime_lib_setting():
    assert cfg.config_from({}).runtime_lib is None
    assert cfg.config_from({"EMBER_RUNTIME_LIB": "/opt/lib.so"}).runtime_lib == Path("/opt/lib.so")
