"""The embedded session's Hadoop configuration without YARN's defaults
(framework/yarn_defaults.py): Hadoop loads the jar's empty ``yarn-default.xml``, and every
other default resource stays as it was."""

from __future__ import annotations

import os
import zipfile

from framework import jvm_options, yarn_defaults


def test_the_session_s_hadoop_configuration_has_no_yarn_defaults_and_every_other_default(spark):
    assert yarn_defaults.class_path_entry() is not None
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    # Hadoop found the jar's yarn-default.xml before the one in its own jar
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    assert str(loader.getResource(yarn_defaults.RESOURCE).getPath()).startswith(
        f"file:{yarn_defaults.jar_path()}!"), "the empty yarn-default.xml is not the one Hadoop finds"
    hadoops = jvm.java.util.Collections.list(loader.getResources(yarn_defaults.RESOURCE))
    assert len(hadoops) >= 2, "Hadoop's own yarn-default.xml should still be on the class path, behind ours"
    # what Hadoop's own yarn-default.xml holds: none of it is in the session's configuration
    theirs = getattr(jvm, "org.apache.hadoop.conf.Configuration")(False)
    theirs.addResource(hadoops[1])
    assert theirs.size() > 500, theirs.size()
    names = str(jvm.java.lang.String.join("\n", theirs.getPropsWithPrefix("").keySet())).split("\n")
    kept = [name for name in names if conf.get(name) is not None and conf.getPropertySources(name) is not None
            and "yarn-default.xml" in list(conf.getPropertySources(name))]
    assert kept == []
    assert conf.get("yarn.resourcemanager.address") is None
    # every other default resource stays: core-default.xml's, and mapred-default.xml's
    for name, source in (("fs.defaultFS", "core-default.xml"), ("fs.trash.interval", "core-default.xml"),
                         ("mapreduce.job.maps", "mapred-default.xml")):
        assert conf.get(name) is not None, name
        assert source in list(conf.getPropertySources(name)), (name, list(conf.getPropertySources(name)))


def test_a_session_keeps_yarn_s_defaults_where_asked_or_with_a_master_that_is_not_local(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPICLAKE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(yarn_defaults.YARN_DEFAULTS_ENV, raising=False)
    built = yarn_defaults.session_settings({}, "local[*]")
    jar = yarn_defaults.jar_path()
    assert built == {jvm_options.DRIVER_CLASS_PATH: str(jar)}
    with zipfile.ZipFile(jar) as archive:
        assert archive.namelist() == [yarn_defaults.RESOURCE]
        assert b"<property>" not in archive.read(yarn_defaults.RESOURCE)
    # the caller's own class path entries come first (a yarn-default.xml of theirs wins)
    merged = yarn_defaults.session_settings({jvm_options.DRIVER_CLASS_PATH: "/opt/mine.jar"}, "local[2]")
    assert merged[jvm_options.DRIVER_CLASS_PATH] == f"/opt/mine.jar{os.pathsep}{jar}"
    # a YARN (or any other) master: its client needs YARN's defaults
    for master in ("yarn", "spark://127.0.0.1:7077", "k8s://https://127.0.0.1:6443"):
        assert yarn_defaults.session_settings({}, master) == {}
    # a jar that is not one (a disk that filled up) is built again
    jar.write_bytes(b"not a jar")
    assert yarn_defaults.session_settings({}, "local[*]") == built
    assert zipfile.is_zipfile(jar)
    # a jar whose yarn-default.xml says something else is built again too
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr(yarn_defaults.RESOURCE, "<configuration><property><name>x</name></property></configuration>")
    assert yarn_defaults.class_path_entry(build_missing=False) is None
    assert yarn_defaults.class_path_entry() == str(jar)
    monkeypatch.setenv(yarn_defaults.YARN_DEFAULTS_ENV, "keep")
    assert yarn_defaults.session_settings({}, "local[*]") == {}
    assert yarn_defaults.class_path_entry() is None
