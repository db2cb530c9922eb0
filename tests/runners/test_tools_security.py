"""Every parameter of every adapter refuses shell syntax, options and paths leaving the workdir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runners.tools import ADAPTERS, Host, LaunchContext, ParamError, build_command

# Values that must never reach an argv, whatever the parameter's kind.
HOSTILE = [
    "1m; rm -rf /",
    "$(id)",
    "`id`",
    "a\nb",
    "4k\x00",
    "../../etc/passwd",
    "/etc/passwd",
    "-rf",
    "--output=/etc/passwd",
    "4k | tee /tmp/x",
    "1g && reboot",
    "${IFS}",
    "",
    "a@/etc/x",  # IOR -o and mdtest -d split paths on '@'
    "a:/etc",  # fio splits directory lists on ':'
]

# Parameters that are required, so the others can be tried one at a time.
BASE = {"qperf": {"server": "10.0.0.9"}}

PARAMS = [(tool, name) for tool, adapter in ADAPTERS.items() for name in adapter.params]


@pytest.fixture(scope="module")
def shared_ctx(tmp_path_factory) -> LaunchContext:
    """One workdir for the many checks that never touch it (making one per test is slow)."""
    root = tmp_path_factory.mktemp("security")
    (root / "work").mkdir()
    return LaunchContext(workdir=root / "work", scratch=root)


@pytest.mark.parametrize(("tool", "name"), PARAMS)
def test_hostile_value_is_rejected_naming_the_parameter(tool, name, shared_ctx):
    for value in HOSTILE:
        params = {**BASE.get(tool, {}), name: value}
        with pytest.raises(ParamError) as exc:
            build_command(tool, params, shared_ctx)
        assert exc.value.param == name, value
        assert str(exc.value).startswith(f"{name}: "), value


LIST_PARAMS = [(t, n) for t, n in PARAMS if ADAPTERS[t].params[n].kind == "list"]


@pytest.mark.parametrize(("tool", "name"), LIST_PARAMS)
def test_hostile_value_inside_a_list(tool, name, shared_ctx):
    for value in HOSTILE:
        with pytest.raises(ParamError, match=f"^{name}: "):
            build_command(tool, {**BASE.get(tool, {}), name: ["1", value]}, shared_ctx)


def _path_params() -> list[tuple[str, str, bool]]:
    found = []
    for tool, adapter in ADAPTERS.items():
        for name, param in adapter.params.items():
            if param.kind == "path":
                found.append((tool, name, False))
            elif param.kind == "list" and param.item == "path":
                found.append((tool, name, True))
    return found


PATH_PARAMS = _path_params()


# Tools that put no files in the benchmark directory (a network benchmark; StorageBench works
# on the storage targets through beegfs-ctl): every other tool names its files by path.
NO_FILES = {"qperf", "storagebench"}


def test_every_adapter_with_files_has_path_parameters():
    assert {tool for tool, _, _ in PATH_PARAMS} == set(ADAPTERS) - NO_FILES
    assert {"fio", "dd", "ior", "mdtest", "iozone", "elbencho"} <= set(ADAPTERS) - NO_FILES


@pytest.mark.parametrize(("tool", "name", "is_list"), PATH_PARAMS)
def test_symlink_escaping_the_workdir(tool, name, is_list, ctx, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_text("secret")
    (ctx.workdir / "escape").symlink_to(outside)
    (ctx.workdir / "filelink").symlink_to(outside / "file")
    (ctx.workdir / "inner").mkdir()
    (ctx.workdir / "ok").symlink_to(ctx.workdir / "inner")
    for value in ("escape", "escape/sub/file", "filelink", "inner/../escape/x"):
        given = [value] if is_list else value
        with pytest.raises(ParamError) as exc:
            build_command(tool, {**BASE.get(tool, {}), name: given}, ctx)
        assert exc.value.param == name, value
    # A symlink that stays inside, and absolute paths inside the workdir, are fine.
    for value in ("ok/sub", str(ctx.workdir / "inner" / "x")):
        given = [value] if is_list else value
        build_command(tool, {**BASE.get(tool, {}), name: given}, ctx)


@pytest.mark.parametrize(("tool", "name", "is_list"), PATH_PARAMS)
def test_dotdot_and_absolute_escapes(tool, name, is_list, shared_ctx):
    ctx = shared_ctx
    sibling = ctx.workdir.parent / "sibling"
    for value in ("..", "../x", "a/../../x", str(sibling), "/", "/tmp/x", f"{ctx.workdir}x/y"):
        given = [value] if is_list else value
        with pytest.raises(ParamError, match=f"^{name}: "):
            build_command(tool, {**BASE.get(tool, {}), name: given}, ctx)


@pytest.mark.parametrize("tool", list(ADAPTERS))
def test_unknown_parameter_is_named(tool, shared_ctx):
    for name in ("bogus", "1m; rm -rf /", "--output"):
        with pytest.raises(ParamError) as exc:
            build_command(tool, {**BASE.get(tool, {}), name: "1"}, shared_ctx)
        assert exc.value.param == name
        assert "unknown parameter" in str(exc.value)


@pytest.mark.parametrize("tool", list(ADAPTERS))
def test_out_of_range_counts(tool, shared_ctx):
    adapter = ADAPTERS[tool]
    for name, param in adapter.params.items():
        if param.kind != "int" or param.min is None or param.max is None:
            continue
        for value in (param.min - 1, param.max + 1, 10**30):
            with pytest.raises(ParamError, match=f"^{name}: "):
                build_command(tool, {**BASE.get(tool, {}), name: value}, shared_ctx)


@pytest.mark.parametrize("address", ["$(reboot)", "-oProxyCommand=sh", "a b", "h;id", "x\n"])
def test_hostile_host_addresses(address):
    with pytest.raises(ParamError, match="^hosts: "):
        Host("c1", address)


def test_mpirun_must_be_a_plain_word(ctx):
    mpi = LaunchContext(ctx.workdir, ctx.scratch, mode="mpi", hosts=(Host("c1", "c1"),),
                        mpirun="mpirun --mca plm_rsh_agent=sh")  # fmt: skip
    with pytest.raises(ParamError, match="^mpirun: "):
        build_command("ior", {}, mpi)


@pytest.mark.parametrize("tool", list(ADAPTERS))
def test_argv_holds_strings_without_shell_or_control_characters(tool, ctx):
    cmd = build_command(tool, BASE.get(tool, {}), ctx)
    assert all(isinstance(arg, str) and arg for arg in cmd.argv)
    for arg in cmd.argv[1:]:
        assert not any(ch in arg for ch in ";|&`<>\n\x00 \t'\""), arg
    for step in cmd.prepare:
        assert all(isinstance(arg, str) and arg for arg in step)
        assert not any(ch in arg for arg in step[1:] for ch in ";|&`<>\n\x00 \t'\""), step
    for path in cmd.dirs:
        resolved = os.path.realpath(path)
        assert resolved == os.path.realpath(ctx.workdir) or resolved.startswith(
            os.path.realpath(ctx.workdir) + os.sep
        ), path
    for path in cmd.files:
        assert Path(path).parent == ctx.scratch
