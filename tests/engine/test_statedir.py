"""The state dir is trusted only when it is ours and private; its files are never links."""

import os

import pytest

from breakerdeck.engine.errors import StateDirError
from breakerdeck.engine.storage.statedir import prepare, read_private, write_private

NOBODY = 65534


def test_a_missing_state_dir_is_created_private(tmp_path):
    created = prepare(tmp_path / "a" / "state")
    assert created.is_dir()
    assert created.stat().st_mode & 0o777 == 0o700


def test_a_state_dir_writable_by_others_is_refused_with_the_fix(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    shown = r"writable by others \(mode 0777, drwxrwxrwx\): chmod go-w"
    with pytest.raises(StateDirError, match=shown):
        prepare(shared)


def test_a_state_dir_owned_by_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(StateDirError, match="belongs to uid 65534"):
        prepare(theirs)


def test_a_symlink_in_place_of_the_state_dir_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(StateDirError, match="not a directory"):
        prepare(tmp_path / "link")


def test_writing_never_follows_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    state = prepare(tmp_path / "state")
    (state / "mark.json").symlink_to(victim)
    write_private(state / "mark.json", "{}")
    assert victim.read_text() == "precious"
    assert not (state / "mark.json").is_symlink()
    assert (state / "mark.json").stat().st_mode & 0o777 == 0o600


def test_a_link_to_a_file_of_ours_is_read_as_mounted_secrets_are(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret")
    (tmp_path / "operator.token").symlink_to(secret)
    assert read_private(tmp_path / "operator.token") == "s3cret"


def test_a_link_to_a_file_of_another_user_is_not_read(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.write_text("token")
    os.chown(theirs, NOBODY, NOBODY)
    (tmp_path / "operator.token").symlink_to(theirs)
    with pytest.raises(StateDirError, match="belongs to uid 65534"):
        read_private(tmp_path / "operator.token")


def test_a_file_planted_by_another_user_is_not_read(tmp_path):
    planted = tmp_path / "operator.token"
    planted.write_text("theirs")
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(StateDirError, match="belongs to uid 65534"):
        read_private(planted)


def test_a_file_others_can_write_is_not_read(tmp_path):
    loose = tmp_path / "operator.token"
    loose.write_text("token")
    loose.chmod(0o666)
    with pytest.raises(StateDirError, match="writable by others"):
        read_private(loose)
