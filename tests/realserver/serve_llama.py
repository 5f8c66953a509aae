"""``python -m llama_cpp.server`` with llama.cpp's weight repacking off, then its own arguments.

Repacking puts the weights in the CPU's extra buffer types; on a CPU that
advertises AMX, that means AMX tiles, whose first instruction faults (SIGSEGV)
in virtual machines that do not enable the AMX state. The server has no option
for it (``use_extra_bufts`` of llama.cpp's model parameters), so the default
parameters are wrapped before the server loads the model. Everything else is
the stock server.
"""

from __future__ import annotations

import sys

import llama_cpp.llama_cpp as llama_lib

_defaults = llama_lib.llama_model_default_params


def _no_repacking() -> llama_lib.llama_model_params:
    params = _defaults()
    params.use_extra_bufts = False
    return params


llama_lib.llama_model_default_params = _no_repacking

if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    sys.argv[0] = "llama_cpp.server"
    main()
