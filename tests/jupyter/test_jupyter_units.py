"""Pure parts of the notebook layer, without a kernel: parsing, cell analysis, ref scanning."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from nbdist import events
from nbdist.jupyter import kernelspec, magics
from nbdist.jupyter.display import holds_refs


def test_defined_names_are_top_level_functions_and_classes_only() -> None:
    source = ("import os\nx = 1\ndef f():\n    def inner(): pass\nasync def g(): pass\n"
              "class C:\n    def method(self): pass\nif x:\n    def hidden(): pass\n")
    assert magics.defined_names(source) == ["f", "g", "C"]


def test_remote_flags_split_between_functions_and_classes() -> None:
    args = magics._parse(magics._remote_parser(),
                         '--num-cpus 2 --resources \'{"disk": 1}\' --max-retries 0 '
                         "--max-restarts 2 --num-returns 2 --max-concurrency 4")
    assert args is not None
    assert magics.remote_options(args, for_class=False) == {
        "num_cpus": 2.0, "resources": {"disk": 1}, "max_retries": 0, "num_returns": 2}
    assert magics.remote_options(args, for_class=True) == {
        "num_cpus": 2.0, "resources": {"disk": 1}, "max_restarts": 2, "max_concurrency": 4}


@pytest.mark.parametrize("line", ["--bogus", "start --num-cpus two", "start --resources 3",
                                  "start --resources '{bad json'", "start 'unbalanced"])
def test_bad_nbdist_lines_raise_usage_error_with_the_valid_flags(line: str) -> None:
    with pytest.raises(UsageError, match="usage: %nbdist"):
        magics._parse(magics._nbdist_parser(), line)


def test_refs_are_found_inside_containers_but_not_deeper_than_two_levels() -> None:
    import nbdist

    ref = nbdist.ObjectRef(1, False)
    assert holds_refs(ref) and holds_refs([ref]) and holds_refs({"a": (ref,)})
    assert not holds_refs([[[ref]]]) and not holds_refs("ObjectRef") and not holds_refs([1])


def test_kernel_json_runs_this_python_with_the_extension() -> None:
    spec = kernelspec.kernel_json("Python 3 (nbdist)", python="/py")
    assert spec["argv"] == ["/py", "-m", "ipykernel_launcher", "-f", "{connection_file}",
                            '--IPKernelApp.exec_lines=["__import__(\'nbdist\')'
                            '.load_ipython_extension(get_ipython())"]']


def test_load_and_unload_in_a_plain_shell() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    import nbdist
    from nbdist.jupyter import load_ipython_extension, unload_ipython_extension

    ip = InteractiveShell.instance()
    html = ip.display_formatter.formatters["text/html"]
    try:
        load_ipython_extension(ip)
        load_ipython_extension(ip)  # a second load changes nothing
        assert "nbdist" in ip.magics_manager.magics["line"]
        assert "remote" in ip.magics_manager.magics["cell"]
        assert html.lookup_by_type(nbdist.ObjectRef) is not None
        ip.run_cell("x = 1")
        assert events.current_submitter() is not None
        assert ip.custom_exceptions == (nbdist.exceptions.TaskError, KeyboardInterrupt)
    finally:
        unload_ipython_extension(ip)
        InteractiveShell.clear_instance()
    assert events.current_submitter() is None and ip.custom_exceptions == ()
    with pytest.raises(KeyError):
        html.lookup_by_type(nbdist.ObjectRef)
