"""`--out` while a bench writes it. Rules:
- it is claimed before the models load: made where missing, proven writable, and locked (flock on
  the folder itself, which the kernel releases whenever the process ends, a kill included): a
  second bench on it is refused with one line, and its results cannot interleave with the first's;
- earlier results are refused unless `--force` (overwrite) or `--resume` (continue them);
- results are saved after each finished problem, each file replaced whole (report.write_results):
  a kill or a full disk loses at most the problems in flight. A save that fails is said once and
  tried again at the next problem; the caller learns from `unsaved` that the last one failed;
- a bench that saved nothing leaves nothing behind: the folders it made are removed.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from edgereason.errors import ConfigError
from edgereason.evaluation.report import CSV, RESULTS, Results, load_results, write_results
from edgereason.evaluation.resume import NOT_RESUMABLE, RESUMED_RESULTS
from edgereason.util.files import check_no_dangling_link, make_writable_folder
from edgereason.util.terminal import shown_path


def _on_stderr(note: str) -> None:
    print(note, file=sys.stderr)


class OutFolder:
    def __init__(
        self,
        path: Path,
        force: bool = False,
        resume: bool = False,
        note: Callable[[str], None] = _on_stderr,
    ) -> None:
        """note: how a failed save is said (the CLI ends its progress line first)."""
        self.path, self.force, self.resume, self._note = path, force, resume, note
        self.saved_problems = 0  # the problems in the last results saved
        self.unsaved: OSError | None = None  # why the last save failed, where it did
        self._made: list[Path] = []  # folders this bench made, outermost first
        self._fd: int | None = None

    def __enter__(self) -> OutFolder:
        try:
            self._claim()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._release()

    def earlier(self) -> Results | None:
        """The results `--resume` continues (None without it), checked for what resuming reads."""
        return load_results(self.path, RESUMED_RESULTS, NOT_RESUMABLE) if self.resume else None

    def save(self, config: dict, runs: list[dict]) -> bool:
        """Write the results; False where that failed (said on stderr the first time in a row)."""
        try:
            write_results(self.path, config, runs)
        except OSError as e:
            if self.unsaved is None:
                cannot = f"cannot write the results to {shown_path(self.path)} ({e.strerror or e})"
                goes_on = "the bench goes on and tries again after each problem"
                self._note(f"edgereason: note: {cannot}; {goes_on}")
            self.unsaved = e
            return False
        self.unsaved = None
        self.saved_problems = sum(run["problems"] for run in runs)
        return True

    def _claim(self) -> None:
        check_no_dangling_link("--out", self.path)
        out = shown_path(self.path)
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"--out {out} is a file; give a folder for the results")
        self._made = [p for p in (*reversed(self.path.parents), self.path) if not p.exists()]
        try:
            make_writable_folder(self.path)
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise ConfigError(f"cannot write results to --out {out}: {e.strerror or e}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = f"--out {out} is being written by another bench"
            raise ConfigError(f"{busy}; wait for it to end, or choose another --out") from None
        self._check_contents()

    def _check_contents(self) -> None:
        out = shown_path(self.path)
        if folders := [name for name in (RESULTS, CSV) if (self.path / name).is_dir()]:
            in_the_way = f"--out {out} holds a folder named {folders[0]} where the results go"
            raise ConfigError(f"{in_the_way}; move it, or choose another --out")
        earlier = (self.path / RESULTS).exists()
        if self.resume and not earlier:
            raise ConfigError(
                f"--resume: {out} holds no {RESULTS} to continue; run without --resume"
            )
        if earlier and not (self.force or self.resume):
            choices = (
                "pass --resume to continue it, --force to overwrite it, or choose another --out"
            )
            raise ConfigError(f"{out} holds the results of an earlier bench; {choices}")

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the lock goes with it
            self._fd = None
        if not self.saved_problems:  # nothing of this bench's is there: the folders it made go too
            for folder in reversed(self._made):
                try:
                    folder.rmdir()
                except OSError:  # not empty (someone else's file), or gone already
                    break
