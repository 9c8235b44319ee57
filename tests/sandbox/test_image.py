"""Building the sandbox image: mirror discovery, the root filesystem tarball, the checks before
debootstrap, and (against the real engine) the final image on a local base."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from atc.cli import main
from atc.errors import ConfigError
from sandbox.docker.backend import connect, docker_available
from sandbox.docker.image import (
    BASE_REPOSITORY,
    SUITE,
    build_image,
    find_apt_mirror,
    image_info,
    make_rootfs,
    runner_modules,
    write_rootfs_tar,
)

REPO = Path(__file__).resolve().parents[2]
# Reserved test names (RFC 2606): no real mirror is ever written into the repository.
MIRROR = "http://apt.invalid/debian"
OTHER = "http://other.invalid/debian"


def _apt(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "etc" / "apt" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_mirror_from_deb822_skips_security_and_disabled_stanzas(tmp_path: Path) -> None:
    root = _apt(tmp_path, {"sources.list.d/debian.sources": (
        "Types: deb\nURIs: http://security.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        f"Types: deb\nURIs: {OTHER}\nSuites: bookworm\nEnabled: no\n\n"
        f"Types: deb-src deb\n# a comment: with a colon\nURIs: {MIRROR}\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )})
    assert find_apt_mirror(root) == MIRROR


def test_mirror_from_one_line_sources(tmp_path: Path) -> None:
    root = _apt(tmp_path, {"sources.list": (
        "# deb http://commented.invalid/debian bookworm main\n"
        "deb-src http://src.invalid/debian bookworm main\n"
        "deb http://security.invalid/debian-security bookworm-security main\n"
        f"deb [arch=amd64 signed-by=/k.gpg] {MIRROR} bookworm main contrib\n"
    )})
    assert find_apt_mirror(root) == MIRROR


def test_no_mirror_is_none(tmp_path: Path) -> None:
    assert find_apt_mirror(tmp_path) is None
    assert find_apt_mirror(_apt(tmp_path, {"sources.list": "\n# nothing here\n"})) is None


@pytest.mark.skipif(not Path("/etc/apt").is_dir(), reason="not a Debian-family machine")
def test_this_machine_has_a_mirror() -> None:
    mirror = find_apt_mirror()
    assert mirror is not None and mirror.startswith(("http://", "https://", "file:/"))


def test_runner_needs_only_the_standard_library() -> None:
    modules = runner_modules()
    assert {"json", "socket"} <= set(modules)
    assert all(m in sys.stdlib_module_names for m in modules), modules


def test_rootfs_tarball_leaves_out_docs_and_keeps_links(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "usr/bin").mkdir(parents=True)
    (rootfs / "usr/share/doc/python3").mkdir(parents=True)
    (rootfs / "usr/share/doc/python3/copyright").write_text("long text")
    (rootfs / "var/lib/apt/lists").mkdir(parents=True)
    (rootfs / "var/lib/apt/lists/big_Packages").write_text("x" * 1000)
    (rootfs / "usr/bin/python3.11").write_text("#!binary")
    (rootfs / "usr/bin/python3.11").chmod(0o755)
    os.symlink("python3.11", rootfs / "usr/bin/python3")
    tar_path = write_rootfs_tar(rootfs, tmp_path / "rootfs.tar")
    with tarfile.open(tar_path) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert "usr/bin/python3.11" in members and members["usr/bin/python3.11"].mode & 0o111
    assert members["usr/bin/python3"].issym() and members["usr/bin/python3"].linkname == "python3.11"
    assert "usr/share/doc" in members  # the directory stays, its content goes
    assert not any(n.startswith(("usr/share/doc/", "var/lib/apt/lists/")) for n in members)


def test_a_cached_rootfs_is_reused_without_debootstrap(tmp_path: Path) -> None:
    (tmp_path / "rootfs" / SUITE).mkdir(parents=True)
    (tmp_path / "rootfs" / f"{SUITE}.done").write_text(MIRROR)
    steps: list[str] = []
    assert make_rootfs(tmp_path, debootstrap="/nonexistent/debootstrap", log=steps.append) == tmp_path / "rootfs" / SUITE
    assert "reusing" in steps[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to exercise the debootstrap checks")
def test_missing_debootstrap_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        make_rootfs(tmp_path, mirror=MIRROR, debootstrap=str(tmp_path / "no-debootstrap"))
    assert "debootstrap is not installed" in info.value.message and "apt-get install" in (info.value.hint or "")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to an unprivileged user")
def test_building_offline_as_non_root_says_it_needs_root() -> None:
    cache = Path(tempfile.mkdtemp(prefix="atc-test-image-"))  # pytest's tmp dirs are closed to other users
    os.chmod(cache, 0o777)
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
            "from pathlib import Path\nfrom atc.errors import ConfigError\nfrom sandbox.docker.image import make_rootfs\n"
            f"try:\n    make_rootfs(Path({str(cache)!r}), mirror={MIRROR!r})\n"
            "except ConfigError as e:\n    print(e.message)\n")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(cache)})
    shutil.rmtree(cache, ignore_errors=True)
    assert "needs root" in out.stdout, out.stderr


def test_bad_mirror_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "build", "--offline", "--mirror", "not-a-url"]) == 2
    assert "not a URL" in capsys.readouterr().err


def test_build_without_engine_exits_2_with_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert main(["sandbox", "build", "--offline", "--json"]) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and doc["error"]["type"] == "ConfigError"
    assert "not running" in err and "setup-docker.sh" in err and "Traceback" not in err


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine or no atc-sandbox:latest image")
def test_offline_with_a_missing_base_refuses_to_pull() -> None:
    with pytest.raises(ConfigError) as info:
        build_image(offline=True, base="atc-no-such-base:never", image="atc-sandbox:h3-never")
    assert "forbids pulling" in info.value.message


@pytest.mark.docker
@pytest.mark.skipif(not docker_available(), reason="no Docker engine or no atc-sandbox:latest image")
def test_final_image_on_a_local_base_records_versions(capsys: pytest.CaptureFixture[str]) -> None:
    client = connect()
    base = f"{BASE_REPOSITORY}:{SUITE}"
    if image_info(client, base) is None:
        pytest.skip(f"{base} is not there (the image was built from another base)")
    name = "atc-sandbox:test-h3"
    try:
        code = main(["sandbox", "build", "--offline", "--base", base, "--image", name, "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert code == 0 and doc["ok"] is True
        assert doc["image"] == name and doc["base"] == base and doc["offline"] is True
        assert doc["python"].startswith("3.") and doc["atc_version"]
        info = image_info(client, name)
        assert info is not None and info.labels["atc.python"] == doc["python"]
        config = client.api.inspect_image(name)["Config"]
        assert config["User"] == "65534:65534"
        assert not any(e.startswith(("ATC_", "OPENAI_")) for e in config.get("Env") or [])
    finally:
        client.images.remove(name, force=True)
        client.close()


def test_sandbox_without_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["type"] == "UsageError" and "build or status" in err
