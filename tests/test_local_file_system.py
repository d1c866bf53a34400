"""The embedded session's local file system (framework/local_file_system.py): its classes are
the session's ``file:``, and they answer as Hadoop's own do, side by side on the same files."""

from __future__ import annotations

import os
import stat

import pytest

from framework import jvm_options, local_file_system


def _file_systems(spark):
    """(ours, Hadoop's) raw local file systems, initialised on the session's Hadoop configuration."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = getattr(jvm, "java.net.URI")("file:///")
    ours = getattr(jvm, "topiclake.hadoop.NioRawLocalFileSystem")()
    hadoops = getattr(jvm, "org.apache.hadoop.fs.RawLocalFileSystem")()
    for file_system in (ours, hadoops):
        file_system.initialize(uri, conf)
    return ours, hadoops


def _path(spark, path) -> object:
    return getattr(spark.sparkContext._jvm, "org.apache.hadoop.fs.Path")(f"file:{path}")


def test_the_session_s_file_system_is_ours_where_it_writes_and_where_delta_commits(spark):
    assert local_file_system.class_path_entry() is not None, "javac could not build the classes (set-up installs it)"
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = getattr(jvm, "java.net.URI")("file:///")
    # FileSystem: where Spark writes data files; FileContext: where Delta's log store renames commits
    assert getattr(jvm, "org.apache.hadoop.fs.FileSystem").get(uri, conf).getClass().getName() == \
        "topiclake.hadoop.NioRawLocalFileSystem"
    context = getattr(jvm, "org.apache.hadoop.fs.FileContext").getFileContext(uri, conf)
    assert context.getDefaultFileSystem().getClass().getName() == "topiclake.hadoop.NioRawLocalFs"


@pytest.mark.parametrize("mode", [0o644, 0o755, 0o600, 0o777, 0o000, 0o444, 0o421, 0o214, 0o1777])
@pytest.mark.parametrize("kind", ["file", "folder"])
def test_permissions_are_what_hadoop_s_chmod_sets(spark, tmp_path, mode, kind):
    ours, hadoops = _file_systems(spark)
    permission = getattr(spark.sparkContext._jvm, "org.apache.hadoop.fs.permission.FsPermission")(mode)
    modes = []
    for name, file_system in (("ours", ours), ("hadoop", hadoops)):
        target = tmp_path / name
        target.mkdir() if kind == "folder" else target.write_text("x")
        os.chmod(target, 0o600 if mode != 0o600 else 0o644)  # from another mode, so the call must change it
        file_system.setPermission(_path(spark, target), permission)
        modes.append(stat.S_IMODE(os.stat(target).st_mode))
        os.chmod(target, 0o700)  # the test's tmp_path must stay removable
    assert modes[0] == modes[1], f"{oct(mode)} on a {kind}: ours {oct(modes[0])}, Hadoop's {oct(modes[1])}"
    if mode != 0o1777 or kind == "folder":
        assert modes[0] == mode


def _status(file_system, path):
    status = file_system.getFileLinkStatus(path)
    return (str(status.getPath()), status.isDirectory(), status.isSymlink(), status.getLen(),
            status.getModificationTime(), str(status.getPermission()),
            str(status.getSymlink()) if status.isSymlink() else None)


def test_link_status_is_hadoop_s_for_files_folders_links_and_missing_paths(spark, tmp_path):
    from py4j.protocol import Py4JJavaError

    ours, hadoops = _file_systems(spark)
    (tmp_path / "file").write_text("twelve bytes")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for name in ("file", "folder", "link"):
        path = _path(spark, tmp_path / name)
        assert _status(ours, path) == _status(hadoops, path), name
    for name in ("missing", "dangling"):
        answers = []
        for file_system in (ours, hadoops):
            try:
                answers.append(_status(file_system, _path(spark, tmp_path / name)))
            except Py4JJavaError as error:
                answers.append(error.java_exception.getClass().getName())
        assert answers[0] == answers[1], name
    assert answers[0] == "java.io.FileNotFoundException"


def test_a_session_keeps_hadoop_s_where_asked_or_where_the_classes_cannot_be_built(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPICLAKE_CACHE", str(tmp_path / "cache"))
    built = local_file_system.session_settings({}, {})
    assert built[jvm_options.DRIVER_CLASS_PATH] == str(local_file_system.jar_path())
    assert {k: built[k] for k in local_file_system.HADOOP_SETTINGS} == local_file_system.HADOOP_SETTINGS
    # the session's own class path entries come first
    merged = local_file_system.session_settings({jvm_options.DRIVER_CLASS_PATH: "/opt/mine.jar"}, {})
    assert merged[jvm_options.DRIVER_CLASS_PATH] == f"/opt/mine.jar{os.pathsep}{local_file_system.jar_path()}"
    # the caller names a file: file system of its own
    assert local_file_system.session_settings({}, {"spark.hadoop.fs.file.impl": "x.Mine"}) == {}
    monkeypatch.setenv(local_file_system.LOCAL_FS_ENV, "hadoop")
    assert local_file_system.session_settings({}, {}) == {}
    monkeypatch.delenv(local_file_system.LOCAL_FS_ENV)
    # a jar that is not one (a disk that filled up, a hand that wrote it) is built again
    local_file_system.jar_path().write_bytes(b"not a jar")
    assert local_file_system.session_settings({}, {})[jvm_options.DRIVER_CLASS_PATH] == built[
        jvm_options.DRIVER_CLASS_PATH]
    assert local_file_system.jar_path().stat().st_size > len(b"not a jar")
    # no JDK: nothing to build with, so Hadoop's
    monkeypatch.setenv("TOPICLAKE_CACHE", str(tmp_path / "another-cache"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert local_file_system.session_settings({}, {}) == {}
    assert not local_file_system.jar_path().exists()


def test_a_commit_renamed_into_place_never_replaces_a_file_made_there_first(spark, tmp_path):
    """Delta's log store renames a commit into place through FileContext once it has seen the
    version free; Hadoop's local rename then replaced a commit of that version that another
    process (another JVM, or topiclake's own commit, a hard link) made in between. Ours
    refuses the taken name at the rename itself, as Hadoop's check before it does, and still
    moves a file onto a free name, moves a folder, and replaces where the caller asks to."""
    from py4j.protocol import Py4JJavaError

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = getattr(jvm, "java.net.URI")("file:///")
    ours = getattr(jvm, "topiclake.hadoop.NioRawLocalFs")(uri, conf)
    (tmp_path / "temporary").write_text("this writer's commit")
    (tmp_path / "00000000000000000007.json").write_text("the other writer's commit")
    with pytest.raises(Py4JJavaError) as refused:
        ours.renameInternal(_path(spark, tmp_path / "temporary"), _path(spark, tmp_path / "00000000000000000007.json"))
    assert refused.value.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert (tmp_path / "00000000000000000007.json").read_text() == "the other writer's commit"
    assert (tmp_path / "temporary").read_text() == "this writer's commit"
    ours.renameInternal(_path(spark, tmp_path / "temporary"), _path(spark, tmp_path / "00000000000000000008.json"))
    assert (tmp_path / "00000000000000000008.json").read_text() == "this writer's commit"
    assert not (tmp_path / "temporary").exists()
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "inside").write_text("x")
    ours.renameInternal(_path(spark, tmp_path / "folder"), _path(spark, tmp_path / "moved"))
    assert (tmp_path / "moved" / "inside").read_text() == "x" and not (tmp_path / "folder").exists()
    # FileContext's rename with OVERWRITE (Delta's _last_checkpoint) deletes the target first
    context = getattr(jvm, "org.apache.hadoop.fs.FileContext").getFileContext(uri, conf)
    overwrite = getattr(jvm, "org.apache.hadoop.fs.Options$Rename").OVERWRITE
    (tmp_path / "newer").write_text("newer")
    context.rename(_path(spark, tmp_path / "newer"), _path(spark, tmp_path / "00000000000000000008.json"),
                   _renames(spark, overwrite))
    assert (tmp_path / "00000000000000000008.json").read_text() == "newer" and not (tmp_path / "newer").exists()


def _renames(spark, *options):
    """A Java array of ``Options.Rename`` values (FileContext.rename's varargs)."""
    jvm = spark.sparkContext._jvm
    array = spark.sparkContext._gateway.new_array(getattr(jvm, "org.apache.hadoop.fs.Options$Rename"), len(options))
    for index, option in enumerate(options):
        array[index] = option
    return array
