"""The GPU lane's build imports setuptools (``torch.utils.cpp_extension``) in the test process,
after other tests have fetched upstream sources. Nothing run before it may leave this process in
a state where ``import setuptools`` fails.

The order dependence issue 11 found: on an empty cache, ``upstream.fetch.index_url()`` (no
``PIP_INDEX_URL``, no ``global.index-url`` in pip's configuration) imported ``pip`` in-process to
read pip's default index. Importing ``pip`` on Python < 3.12 makes setuptools' distutils shim
(``_distutils_hack``, installed by ``distutils-precedence.pth``) disable itself for the rest of
the process, so the next ``import setuptools`` loads the standard library's ``distutils`` and
fails ``assert '_distutils' in core.__file__``. The test runs in a child process so that it
starts clean whatever ran before it in this one.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys
    from upstream import fetch

    url = fetch.index_url()
    assert url.startswith(("http://", "https://")) and url.endswith("/"), url
    assert "pip" not in sys.modules, "index_url() imported pip into this process"
    import setuptools  # what torch.utils.cpp_extension imports; fails after an in-process pip
    from torch.utils.cpp_extension import include_paths  # noqa: F401 - the import is what is tested
    print(url)
""")


def test_default_index_lookup_leaves_setuptools_importable():
    """Catches: ``index_url()`` falling back to pip's default index by importing pip in the
    calling process, which disables setuptools' distutils shim and makes every later
    ``import setuptools`` (the GPU launcher build, the header preprocessing test) raise
    ``AssertionError`` -- a test that passes alone and fails after a test that fetched an sdist."""
    env = {k: v for k, v in os.environ.items() if k != "PIP_INDEX_URL"}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip configuration: the built-in default is used
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("/simple/")
