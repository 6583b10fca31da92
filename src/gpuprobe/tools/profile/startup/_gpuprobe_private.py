"""The hook's files, private and never through a link: the same rules as gpuprobe's
``core/files.py``, standalone (the standard library only; Python 3.8+), for the code that runs
inside the command's processes.

- A folder the hook makes (``.gpuprobe-profile/``, ``traces/``, ``now-ID/``) is made 0700; one
  that is there already is used only when it is a real folder (not a link) of this process's
  user, and is set to 0700.
- A file it writes (a status, a trace) goes to a random name opened
  ``O_CREAT|O_EXCL|O_NOFOLLOW`` 0600, then is renamed over its name.
- A file it reads (the request) is read only when it is a regular file of this process's user:
  a request someone else wrote is never obeyed.
"""

import contextlib
import errno
import os
import stat

DIR_MODE = 0o700
FILE_MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def private_dir(path):
    """Make ``path`` 0700, or check the one there is ours and not a link; raises OSError."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the hook armed by hand (a benchmark): its folder made too
        os.makedirs(path, DIR_MODE, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, "a link or a folder that is not yours is in the way", path)
    if stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def temp_beside(path, suffix=".tmp"):
    """A new hidden name in ``path``'s folder that nobody can guess."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.urandom(8).hex()}{suffix}")


def open_new(path):
    """A new file at ``path`` (never an existing name, never through a link), 0600, for
    writing in binary."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    return os.fdopen(os.open(path, flags, FILE_MODE), "wb")


def write_private(path, data):
    """``data`` (bytes) into ``path`` whole, through a temporary name, 0600."""
    tmp = temp_beside(path)
    try:
        with open_new(tmp) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def append_private(path, data):
    """Append ``data`` (bytes) to ``path``, made 0600 when new; never through a link, never to a
    file of someone else's (OSError)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, FILE_MODE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "not a file of this user's: not written", path)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def read_own(path):
    """The bytes of ``path`` when it is a regular file of this process's user; otherwise
    ``PermissionError`` (someone else's) or ``OSError`` (a link, not a file)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_uid != os.geteuid():
            raise PermissionError(
                errno.EPERM, f"written by uid {st.st_uid}, not this process's user: ignored", path
            )
        return f.read()


def own_dir(path):
    """True when ``path`` is a real folder of this process's user that no one else can write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.geteuid()
        and not stat.S_IMODE(st.st_mode) & 0o022
    )
