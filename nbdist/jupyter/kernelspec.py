"""``nbdist install-kernel``: a kernelspec "Python 3 (nbdist)" that loads the extension at start.

The spec runs this interpreter (``sys.executable``) with ipykernel and a start-up line that
calls ``nbdist.load_ipython_extension``, so every notebook on that kernel has the magics,
output routing and widgets without a ``%load_ext`` cell. The hook is called directly rather
than through ``--IPKernelApp.extensions``: IPython would then count nbdist as loaded, and a
notebook's own ``%load_ext nbdist`` (which the hook answers as a no-op) would print
"already loaded" instead of nothing. It is written with jupyter_client's
``KernelSpecManager.install_kernel_spec`` into the user's data directory (``user=True``), a
``prefix`` (e.g. a virtualenv's ``sys.prefix``), or the system-wide location.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

EXTENSION = "nbdist"
LOAD_LINE = f"__import__('{EXTENSION}').load_ipython_extension(get_ipython())"


def kernel_json(display_name: str, python: str | None = None) -> dict[str, object]:
    return {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f",
                 "{connection_file}", f'--IPKernelApp.exec_lines=["{LOAD_LINE}"]'],
        "display_name": display_name,
        "language": "python",
        "metadata": {"debugger": True},
    }


def install(name: str = "nbdist", display_name: str = "Python 3 (nbdist)", *,
            user: bool = True, prefix: str | None = None) -> str:
    """Write the kernelspec and return the directory it was installed to.

    ``prefix`` wins over ``user``; with neither, the system-wide directory is used."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        spec_dir = Path(tmp) / name
        spec_dir.mkdir()
        (spec_dir / "kernel.json").write_text(json.dumps(kernel_json(display_name), indent=1))
        return str(KernelSpecManager().install_kernel_spec(
            str(spec_dir), kernel_name=name, user=user and prefix is None, prefix=prefix))
