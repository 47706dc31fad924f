"""The sandbox's seccomp filter (classic BPF, handed to bwrap --seccomp): system calls that reach
past the namespaces or widen the kernel's attack surface fail with EPERM.

Denied: every socket family but AF_UNIX (EAFNOSUPPORT). AF_INET and AF_INET6 too: the sandbox has
no network, and the kernel does not charge loopback TCP/UDP buffers to the sandbox's memory cgroup
(one sandbox held 1.5 GiB of host memory in them at memory_mb=512), while AF_UNIX buffers are
charged; the other families (AF_VSOCK to a hypervisor, AF_PACKET, AF_ALG, AF_NETLINK...) are not
all confined by a network namespace. New namespaces (unshare, setns, clone with CLONE_NEW* flags;
clone3 reports ENOSYS so libc falls back to clone); mounts; ptrace and cross-process memory
access; kernel keyrings; io_uring; bpf; perf_event_open; userfaultfd; module, kexec, reboot, swap,
clock and quota calls; modify_ldt (16-bit segments: no use to Python, a history of
kernel bugs); file-handle opens; TIOCSTI; and every call through a foreign ABI (i386 int
0x80, x32). x86_64 only: elsewhere `filter_fd` returns None and the sandbox runs without the
filter (namespaces still apply).
"""
from __future__ import annotations

import functools
import os
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
ALLOWED_FAMILIES = (1,)  # AF_UNIX
CLONE_NEW_FLAGS = 0x7E020000   # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
TIOCSTI = 0x5412
# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED = {
    "ptrace": 101, "syslog": 103, "personality": 135, "vhangup": 153, "modify_ldt": 154, "adjtimex": 159, "pivot_root": 155,
    "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}
NR_SOCKET, NR_SOCKETPAIR, NR_CLONE, NR_CLONE3, NR_IOCTL = 41, 53, 56, 435, 16

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24


def program() -> bytes:
    """The filter as an array of struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}."""
    ins: list[tuple] = []  # (code, jt label or 0, jf label or 0, k)

    def op(code, k, jt=0, jf=0):
        ins.append((code, jt, jf, k))

    op(_LD_ABS, _OFF_ARCH)
    op(_JEQ, AUDIT_ARCH_X86_64, jf="deny")
    op(_LD_ABS, _OFF_NR)
    op(_JGE, 0x40000000, jt="deny")  # x32 ABI
    for nr in sorted(DENIED.values()):
        op(_JEQ, nr, jt="deny")
    op(_JEQ, NR_CLONE3, jt="enosys")
    op(_JEQ, NR_SOCKET, jt="family")
    op(_JEQ, NR_SOCKETPAIR, jt="family")
    op(_JEQ, NR_CLONE, jt="clone")
    op(_JEQ, NR_IOCTL, jt="ioctl")
    op(_RET, RET_ALLOW)
    labels = {"family": len(ins)}
    op(_LD_ABS, _OFF_ARG0)
    for fam in ALLOWED_FAMILIES:
        op(_JEQ, fam, jt="allow")
    op(_RET, RET_ERRNO | EAFNOSUPPORT)
    labels["clone"] = len(ins)
    op(_LD_ABS, _OFF_ARG0)
    op(_JSET, CLONE_NEW_FLAGS, jt="deny")
    op(_RET, RET_ALLOW)
    labels["ioctl"] = len(ins)
    op(_LD_ABS, _OFF_ARG1)
    op(_JEQ, TIOCSTI, jt="deny")
    labels["allow"] = len(ins)
    op(_RET, RET_ALLOW)
    labels["deny"] = len(ins)
    op(_RET, RET_ERRNO | EPERM)
    labels["enosys"] = len(ins)
    op(_RET, RET_ERRNO | ENOSYS)
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(ins):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256
        out += struct.pack("<HBBI", code, jt, jf, k)
    return bytes(out)


@functools.lru_cache(maxsize=1)
def supported() -> bool:
    return platform.machine() == "x86_64"


def filter_fd() -> int | None:
    """A new fd (inheritable, at offset 0) holding `program()` for one bwrap --seccomp, or None
    on an architecture this filter does not cover. bwrap reads it to the end: one fd per start."""
    if not supported():
        return None
    fd = os.memfd_create("rvt-sandbox-seccomp", 0)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd
