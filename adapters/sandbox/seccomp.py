"""The sandbox's seccomp filter (classic BPF, handed to bwrap --seccomp): an ALLOW-LIST. The system
calls a Python runtime with NumPy and OpenCV and the sandbox's supervisor (child.py) need are
allowed (ALLOWED, listed in docs/sandbox.md); every other call fails with ENOSYS, as on a kernel that
lacks it (so libraries fall back: clone3 -> clone), and a new call in a later kernel is refused until
someone adds it here. Calls that reach past the namespaces or widen the kernel's attack surface
(DENIED) fail with EPERM, so code that tries them gets a plain "not permitted".

Argument checks on allowed calls: socket and socketpair for AF_UNIX only (EAFNOSUPPORT otherwise:
the sandbox has no network, the kernel does not charge loopback TCP/UDP buffers to the sandbox's
memory cgroup -- one sandbox held 1.5 GiB of host memory in them at memory_mb=512 -- and other
families such as AF_VSOCK, AF_PACKET, AF_ALG or AF_NETLINK are not all confined by a network
namespace); clone without any CLONE_NEW* flag; ioctl never TIOCSTI. Every call through a foreign
ABI (i386 int 0x80, x32) is refused. x86_64 only: elsewhere `filter_fd` returns None and the
sandbox runs without the filter (namespaces still apply).
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
ALLOWED = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7, "lseek": 8,
    "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15,
    "ioctl": 16, "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20, "access": 21, "pipe": 22, "select": 23,
    "sched_yield": 24, "mremap": 25, "msync": 26, "mincore": 27, "madvise": 28, "dup": 32, "dup2": 33, "pause": 34,
    "nanosleep": 35, "getitimer": 36, "alarm": 37, "setitimer": 38, "getpid": 39, "sendfile": 40, "socket": 41,
    "connect": 42, "accept": 43, "sendto": 44, "recvfrom": 45, "sendmsg": 46, "recvmsg": 47, "shutdown": 48,
    "bind": 49, "listen": 50, "getsockname": 51, "getpeername": 52, "socketpair": 53, "setsockopt": 54,
    "getsockopt": 55, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "exit": 60, "wait4": 61, "kill": 62,
    "uname": 63, "fcntl": 72, "flock": 73, "fsync": 74, "fdatasync": 75, "truncate": 76, "ftruncate": 77,
    "getdents": 78, "getcwd": 79, "chdir": 80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85,
    "link": 86, "unlink": 87, "symlink": 88, "readlink": 89, "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93,
    "lchown": 94, "umask": 95, "gettimeofday": 96, "getrlimit": 97, "getrusage": 98, "sysinfo": 99, "times": 100,
    "getuid": 102, "getgid": 104, "setuid": 105, "setgid": 106, "geteuid": 107, "getegid": 108, "setpgid": 109,
    "getppid": 110, "getpgrp": 111, "setsid": 112, "setreuid": 113, "setregid": 114, "getgroups": 115,
    "setgroups": 116, "setresuid": 117, "getresuid": 118, "setresgid": 119, "getresgid": 120, "getpgid": 121,
    "setfsuid": 122, "setfsgid": 123, "getsid": 124, "capget": 125, "capset": 126, "rt_sigpending": 127,
    "rt_sigtimedwait": 128, "rt_sigqueueinfo": 129, "rt_sigsuspend": 130, "sigaltstack": 131, "utime": 132,
    "mknod": 133, "statfs": 137, "fstatfs": 138, "getpriority": 140, "setpriority": 141, "sched_setparam": 142,
    "sched_getparam": 143, "sched_setscheduler": 144, "sched_getscheduler": 145, "sched_get_priority_max": 146,
    "sched_get_priority_min": 147, "sched_rr_get_interval": 148, "mlock": 149, "munlock": 150, "mlockall": 151,
    "munlockall": 152, "prctl": 157, "arch_prctl": 158, "setrlimit": 160, "sync": 162, "gettid": 186,
    "readahead": 187, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "getxattr": 191, "lgetxattr": 192,
    "fgetxattr": 193, "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "removexattr": 197,
    "lremovexattr": 198, "fremovexattr": 199, "tkill": 200, "time": 201, "futex": 202, "sched_setaffinity": 203,
    "sched_getaffinity": 204, "epoll_create": 213, "getdents64": 217, "set_tid_address": 218, "restart_syscall": 219,
    "fadvise64": 221, "timer_create": 222, "timer_settime": 223, "timer_gettime": 224, "timer_getoverrun": 225,
    "timer_delete": 226, "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230, "exit_group": 231,
    "epoll_wait": 232, "epoll_ctl": 233, "tgkill": 234, "utimes": 235, "mbind": 237, "set_mempolicy": 238,
    "get_mempolicy": 239, "waitid": 247, "ioprio_set": 251, "ioprio_get": 252, "inotify_init": 253,
    "inotify_add_watch": 254, "inotify_rm_watch": 255, "openat": 257, "mkdirat": 258, "mknodat": 259,
    "fchownat": 260, "futimesat": 261, "newfstatat": 262, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "readlinkat": 267, "fchmodat": 268, "faccessat": 269, "pselect6": 270, "ppoll": 271,
    "set_robust_list": 273, "get_robust_list": 274, "splice": 275, "tee": 276, "sync_file_range": 277,
    "vmsplice": 278, "utimensat": 280, "epoll_pwait": 281, "signalfd": 282, "timerfd_create": 283, "eventfd": 284,
    "fallocate": 285, "timerfd_settime": 286, "timerfd_gettime": 287, "accept4": 288, "signalfd4": 289,
    "eventfd2": 290, "epoll_create1": 291, "dup3": 292, "pipe2": 293, "inotify_init1": 294, "preadv": 295,
    "pwritev": 296, "rt_tgsigqueueinfo": 297, "recvmmsg": 299, "prlimit64": 302, "syncfs": 306, "sendmmsg": 307,
    "getcpu": 309, "sched_setattr": 314, "sched_getattr": 315, "renameat2": 316, "seccomp": 317, "getrandom": 318,
    "memfd_create": 319, "execveat": 322, "membarrier": 324, "mlock2": 325, "copy_file_range": 326, "preadv2": 327,
    "pwritev2": 328, "pkey_mprotect": 329, "pkey_alloc": 330, "pkey_free": 331, "statx": 332, "rseq": 334,
    "pidfd_send_signal": 424, "pidfd_open": 434, "close_range": 436, "openat2": 437, "faccessat2": 439,
    "epoll_pwait2": 441, "futex_waitv": 449, "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454,
    "futex_wait": 455, "futex_requeue": 456, "mseal": 462,
}
DENIED = {
    "ptrace": 101, "syslog": 103, "personality": 135, "vhangup": 153, "modify_ldt": 154, "pivot_root": 155,
    "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176,
    "quotactl": 179, "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438,
    "process_madvise": 440, "mount_setattr": 442, "process_mrelease": 448,
}
NR_SOCKET, NR_SOCKETPAIR, NR_CLONE, NR_IOCTL = 41, 53, 56, 16

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24


def program() -> bytes:
    """The filter as an array of struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}. Each call's
    test is followed by its own verdict (every jump is local, whatever the list's length)."""
    assert not set(ALLOWED.values()) & set(DENIED.values())
    ins: list[tuple[int, int, int, int]] = []

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        ins.append((code, jt, jf, k))

    def errno(e: int) -> int:
        return RET_ERRNO | e

    def verdict(nr: int, body: list[tuple[int, int]]) -> None:
        """if nr: body (instructions that each return or fall through to the next)."""
        op(_JEQ, nr, 0, len(body))
        for code, k in body:
            op(code, k)

    op(_LD_ABS, _OFF_ARCH)
    op(_JEQ, AUDIT_ARCH_X86_64, 1, 0)
    op(_RET, errno(EPERM))
    op(_LD_ABS, _OFF_NR)
    op(_JGE, 0x40000000, 0, 1)  # x32 ABI
    op(_RET, errno(EPERM))
    for nr in sorted(DENIED.values()):
        verdict(nr, [(_RET, errno(EPERM))])
    for nr in sorted(ALLOWED.values()):
        if nr in (NR_SOCKET, NR_SOCKETPAIR):
            op(_JEQ, nr, 0, 2 + 2 * len(ALLOWED_FAMILIES))
            op(_LD_ABS, _OFF_ARG0)
            for fam in ALLOWED_FAMILIES:
                op(_JEQ, fam, 0, 1)
                op(_RET, RET_ALLOW)
            op(_RET, errno(EAFNOSUPPORT))
        elif nr == NR_CLONE:
            op(_JEQ, nr, 0, 4)
            op(_LD_ABS, _OFF_ARG0)
            op(_JSET, CLONE_NEW_FLAGS, 0, 1)
            op(_RET, errno(EPERM))
            op(_RET, RET_ALLOW)
        elif nr == NR_IOCTL:
            op(_JEQ, nr, 0, 4)
            op(_LD_ABS, _OFF_ARG1)
            op(_JEQ, TIOCSTI, 0, 1)
            op(_RET, errno(EPERM))
            op(_RET, RET_ALLOW)
        else:
            verdict(nr, [(_RET, RET_ALLOW)])
    op(_RET, errno(ENOSYS))
    out = bytearray()
    for code, jt, jf, k in ins:
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
    os.write(fd, _PROGRAM())
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


_PROGRAM = functools.lru_cache(maxsize=1)(program)
