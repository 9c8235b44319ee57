"""The system-call filter ``atc-v2`` (sandbox/inside/seccomp.py): the policy, the BPF program it compiles
to on both architectures (run through a classic-BPF interpreter written here, for every system
call of each table), the Docker profile, and the filter installed for real in a process by the
jail's own function, judged by what the calls return."""

from __future__ import annotations

import errno
import json
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from sandbox.inside import seccomp
from sandbox.inside.seccomp import (
    RET_ALLOW,
    RET_ERRNO,
    X32_SYSCALL_BIT,
    ArgRule,
    arch_of,
    compile_filter,
    table,
)
from sandbox.local.backend import jail_path, sandbox_python

ARCHES = ("x86_64", "aarch64")
ALLOW, EPERM, ENOSYS = RET_ALLOW, RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS


def run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """Evaluate a classic BPF seccomp program the way the kernel does, on one seccomp_data."""
    data = struct.pack("=II", nr & 0xFFFFFFFF, arch) + struct.pack("=Q", 0x401000) + struct.pack(
        "=6Q", *[a & 0xFFFFFFFFFFFFFFFF for a in (tuple(args) + (0,) * 6)[:6]])
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns) + 1):  # forward jumps only: never more steps than instructions
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x54:  # and #k
            acc &= k
            pc += 1
        elif code == 0x06:  # ret #k
            return k
        elif code == 0x05:  # ja
            pc += 1 + k
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # jge #k
            pc += 1 + (jt if acc >= k else jf)
        else:
            raise AssertionError(f"opcode {code:#x} at {pc}")
    raise AssertionError("the program did not return")


def allowed_args(rule: ArgRule) -> tuple[int, ...]:
    args = [0] * 6
    for cond in (rule.allow or ((),))[0]:
        args[cond.arg] = cond.value
    return tuple(args)


@pytest.mark.parametrize("arch", ARCHES)
def test_every_system_call_of_the_table_gets_the_policy_decision(arch: str) -> None:
    program, audit = compile_filter(arch), arch_of(arch).audit
    assert len(program) % 8 == 0 and len(program) // 8 < 1000
    for name, nr in table(arch).items():
        want = seccomp.decision(name)
        got = run_bpf(program, nr, audit, allowed_args(want) if isinstance(want, ArgRule) else (0,) * 6)
        if isinstance(want, ArgRule) or want == "allow":
            assert got == ALLOW, f"{arch} {name} ({nr}): {got:#x}"
        else:
            assert got == RET_ERRNO | int(want), f"{arch} {name} ({nr}): {got:#x}, want errno {want}"


@pytest.mark.parametrize("arch", ARCHES)
def test_what_the_table_does_not_name_is_not_implemented(arch: str) -> None:
    program, audit, known = compile_filter(arch), arch_of(arch).audit, set(table(arch).values())
    for nr in [n for n in range(1200) if n not in known] + [0x3FFFFFFF, 0xFFFFFFFF]:
        assert run_bpf(program, nr, audit) == ENOSYS, nr


def test_foreign_abis_get_enosys() -> None:
    program = compile_filter("x86_64")
    getpid = table("x86_64")["getpid"]
    assert run_bpf(program, getpid, arch_of("x86_64").audit) == ALLOW
    assert run_bpf(program, X32_SYSCALL_BIT | getpid, arch_of("x86_64").audit) == ENOSYS  # x32
    assert run_bpf(program, 20, 0x40000003) == ENOSYS  # i386 (int 0x80): 20 is its getpid
    assert run_bpf(compile_filter("aarch64"), 172, 0x40000028) == ENOSYS  # arm (32-bit) on aarch64


@pytest.mark.parametrize("arch", ARCHES)
def test_socket_families(arch: str) -> None:
    program, audit, nr = compile_filter(arch), arch_of(arch).audit, table(arch)["socket"]
    allowed = {family for family in range(64) if run_bpf(program, nr, audit, (family, 1, 0)) == ALLOW}
    assert allowed == {1, 2, 10, 16}  # Unix, IPv4, IPv6, and netlink with protocol 0:
    assert run_bpf(program, nr, audit, (16, 3, 0)) == ALLOW  # netlink route (getaddrinfo, if_nameindex)
    for protocol in (4, 9, 12, 15, 16):  # sock_diag, audit, netfilter, kobject_uevent, generic
        assert run_bpf(program, nr, audit, (16, 3, protocol)) == EPERM
    assert run_bpf(program, nr, audit, (40, 1, 0)) == EPERM  # vsock
    # The kernel reads an int: upper bits neither smuggle a family in nor fake one.
    assert run_bpf(program, nr, audit, ((1 << 32) | 40, 1, 0)) == EPERM
    assert run_bpf(program, nr, audit, ((1 << 32) | 1, 1, 0)) == ALLOW
    pair = table(arch)["socketpair"]
    assert run_bpf(program, pair, audit, (1, 1, 0)) == ALLOW
    assert run_bpf(program, pair, audit, (40, 1, 0)) == EPERM


@pytest.mark.parametrize("arch", ARCHES)
def test_no_new_namespaces_through_clone_or_unshare(arch: str) -> None:
    program, audit, numbers = compile_filter(arch), arch_of(arch).audit, table(arch)
    thread = 0x3D0F00  # what glibc passes for a pthread
    fork = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD
    for flags in (thread, fork, 0x4111):  # 0x4111: posix_spawn's CLONE_VM | CLONE_VFORK | SIGCHLD
        assert run_bpf(program, numbers["clone"], audit, (flags,)) == ALLOW
    for ns in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert run_bpf(program, numbers["clone"], audit, (fork | ns,)) == EPERM, hex(ns)
        assert run_bpf(program, numbers["unshare"], audit, (ns,)) == EPERM, hex(ns)
    assert run_bpf(program, numbers["unshare"], audit, (0x80,)) == EPERM  # CLONE_NEWTIME
    assert run_bpf(program, numbers["unshare"], audit, (0x400,)) == ALLOW  # CLONE_FILES
    assert run_bpf(program, numbers["clone3"], audit) == ENOSYS  # flags in memory: glibc falls back to clone
    assert run_bpf(program, numbers["setns"], audit) == EPERM


@pytest.mark.parametrize("arch", ARCHES)
def test_terminal_injection_and_personality(arch: str) -> None:
    program, audit, numbers = compile_filter(arch), arch_of(arch).audit, table(arch)
    assert run_bpf(program, numbers["ioctl"], audit, (0, 0x5401)) == ALLOW  # TCGETS
    for cmd in (0x5412, 0x541C, 0x5423, (0xDEAD << 32) | 0x5412):  # the kernel ignores the upper half
        assert run_bpf(program, numbers["ioctl"], audit, (0, cmd)) == EPERM, hex(cmd)
    assert run_bpf(program, numbers["personality"], audit, (0xFFFFFFFF,)) == ALLOW
    assert run_bpf(program, numbers["personality"], audit, (0x0040000,)) == EPERM  # ADDR_NO_RANDOMIZE
    assert run_bpf(program, numbers["personality"], audit, (0x0400000,)) == EPERM  # READ_IMPLIES_EXEC


def test_the_policy_names_real_system_calls_once() -> None:
    known = set(table("x86_64")) | set(table("aarch64"))
    denied = [n for names in seccomp.DENIED.values() for n in names]
    rules = [r.syscall for r in seccomp.ARGUMENT_RULES]
    for name in [*seccomp.ALLOWED, *denied, *rules, *seccomp.PROBED]:
        assert name in known, f"{name} is no system call of either table"
    assert len(denied) == len(set(denied))
    assert not seccomp.ALLOWED & set(denied) and not seccomp.ALLOWED & seccomp.PROBED
    assert not set(rules) & (seccomp.ALLOWED | set(denied))
    for name in ("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
                 "mount", "ptrace", "process_vm_readv", "kexec_load", "init_module", "setns", "shmget", "msgget",
                 "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark"):
        assert seccomp.decision(name) == errno.EPERM, name


def _header(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        pytest.skip(f"no kernel headers at {path}")


def test_numbers_match_the_kernel_headers() -> None:
    x86 = dict(re.findall(r"#define __NR_(\w+) (\d+)", _header("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")))
    assert x86, "the header defines no system call"
    for name, nr in x86.items():
        assert table("x86_64").get(name) == int(nr), name
    generic = _header("/usr/include/asm-generic/unistd.h")
    plain = dict(re.findall(r"#define __NR_(\w+) (\d+)\n", generic))
    for name, nr in plain.items():
        if name in table("aarch64"):
            assert table("aarch64")[name] == int(nr), name
    assert len([n for n in plain if n in table("aarch64")]) > 250


@pytest.mark.parametrize("arch", ARCHES)
def test_docker_profile(arch: str) -> None:
    profile = seccomp.docker_profile(arch)
    json.dumps(profile)
    assert profile["architectures"] == [arch_of(arch).docker] and profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" and "args" not in rule
               for n in rule["names"]}
    numbers = table(arch)
    # The policy, ioctl whole, and what the container's fork server needs to make each run's
    # namespaces and root (each run then installs the BPF program, which denies them again).
    assert allowed == {n for n in seccomp.ALLOWED if n in numbers} | {"ioctl", "clone", "unshare", "mount", "umount2",
                                                                      "pivot_root"}
    denied = {n for rule in profile["syscalls"] if rule.get("errnoRet") == errno.EPERM for n in rule["names"]}
    assert {"keyctl", "add_key", "io_uring_setup", "io_uring_enter", "bpf", "userfaultfd", "shmget", "setns", "chroot",
            "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark"} <= denied
    assert not denied & allowed
    socket_rules = [r["args"] for r in profile["syscalls"] if r["names"] == ["socket"]]
    assert [[(a["index"], a["valueTwo"]) for a in args] for args in socket_rules] == [
        [(0, 1)], [(0, 2)], [(0, 10)], [(0, 16), (2, 0)]]
    assert all(a["op"] == "SCMP_CMP_MASKED_EQ" and a["value"] == 0xFFFFFFFF for args in socket_rules for a in args)


def test_unsupported_machines_are_refused_with_a_reason() -> None:
    with pytest.raises(seccomp.UnsupportedArch, match="riscv64"):
        compile_filter("riscv64")
    assert arch_of("amd64").name == "x86_64" and arch_of("arm64").name == "aarch64"


def test_the_assembler_refuses_a_jump_it_cannot_encode() -> None:
    asm = seccomp._Asm()
    asm.op(0x15, 1, jt="far", jf=0)
    for _ in range(300):
        asm.op(0x06, RET_ALLOW)
    asm.label("far")
    asm.op(0x06, RET_ALLOW)
    with pytest.raises(ValueError, match="out of range"):
        asm.assemble()


# -- the filter installed for real ----------------------------------------------------------------

INSTALLED = r"""
import ctypes, errno, json, mmap, os, socket, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import jail
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = json.loads(sys.argv[3])
isolation = []
libc.prctl(38, 1, 0, 0, 0)
jail.install_seccomp({"seccomp": sys.argv[2], "seccomp-name": "atc-v2"}, isolation)
out = {"isolation": isolation}
def sc(name, *args):
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
for name, args in (("keyctl", (0, -1, 0)), ("io_uring_setup", (1, 0)), ("clone3", (0, 0)), ("vmsplice", (0, 0, 0, 0)),
                   ("getpid", ())):
    out[name] = sc(name, *args)
if os.uname().machine == "x86_64":
    r = libc.syscall(ctypes.c_long(0x40000000 | NR["getpid"]))
    out["x32"] = "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
for family in (socket.AF_UNIX, 40):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        out[f"socket{family}"] = "ok"
    except OSError as exc:
        out[f"socket{family}"] = errno.errorcode[exc.errno]
t = threading.Thread(target=lambda: out.update(thread="ok"))
t.start(); t.join()
out["subprocess"] = subprocess.run(["/bin/sh", "-c", "echo sh-ok"], capture_output=True, text=True).stdout.strip()
if os.uname().machine == "x86_64":
    # mov eax, 20 (i386 getpid); int 0x80; ret -- the i386 ABI from a 64-bit process, in a child:
    # a kernel without IA32 emulation answers int 0x80 with SIGSEGV.
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        os.write(w, str(ctypes.CFUNCTYPE(ctypes.c_int)(address)()).encode())
        os._exit(0)
    os.close(w)
    answer = os.read(r, 100).decode()
    os.waitpid(child, 0)
    out["int80"] = int(answer) if answer else "no i386 ABI"
print(json.dumps(out))
"""


def _installed(program_hex: str) -> dict[str, object]:
    numbers = table(arch_of().name)
    out = subprocess.run([sandbox_python(), "-I", "-S", "-c", INSTALLED, str(jail_path().parent), program_hex,
                          json.dumps(numbers)], capture_output=True, text=True, timeout=60, env={})
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_installed_filter_denies_and_lets_python_run() -> None:
    try:
        code = compile_filter().hex()
    except seccomp.UnsupportedArch as exc:
        pytest.skip(str(exc))
    out = _installed(code)
    assert out["isolation"] == ["seccomp:atc-v2"]
    assert out["keyctl"] == "EPERM" and out["io_uring_setup"] == "EPERM" and out["socket40"] == "EPERM"
    assert out["clone3"] == "ENOSYS" and out["vmsplice"] == "ENOSYS"
    assert out["getpid"] == "ok" and out["socket1"] == "ok" and out["thread"] == "ok"
    assert out["subprocess"] == "sh-ok"
    if os.uname().machine == "x86_64":
        assert out["x32"] == "ENOSYS"
        assert out["int80"] in (-errno.ENOSYS, "no i386 ABI")


def test_a_filter_the_kernel_refuses_is_reported_not_fatal() -> None:
    bogus = struct.pack("=HBBI", 0x15, 200, 0, 1).hex()  # a jump past the end of the program
    out = _installed(bogus)
    assert out["isolation"] == ["seccomp:unavailable (prctl(PR_SET_SECCOMP): Invalid argument)"]
    assert out["io_uring_setup"] == "EFAULT" and out["getpid"] == "ok"  # unfiltered: the kernel's own answer
