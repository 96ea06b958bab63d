"""The package's build compiles the engine into the wheel, so that a user's first
capture is read at once (rtrs_scapy/capture/jit.py says where the code is kept and
why it is found again in a read-only site-packages).  The rest of the metadata is
in setup.cfg."""

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyCompiled(build_py):
    """build_py, then the engine compiled into the build's ``__pycache__`` folders."""

    def run(self):
        super().run()
        if self.editable_mode:   # a checkout: scripts/dissect.sh runs rtrs-dissect compile
            return
        # the build's copy first (``-m`` puts the working folder first on the path); the
        # build environment (PYTHONPATH) kept; numba's own cache place left out
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        subprocess.run([sys.executable, "-m", "rtrs_scapy.analysis.warmup"], env=env, check=True,
                       cwd=self.build_lib)


setup(cmdclass={"build_py": BuildPyCompiled})
