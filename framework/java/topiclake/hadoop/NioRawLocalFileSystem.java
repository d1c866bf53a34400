package topiclake.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system without a forked process per call: {@code fs.file.impl}
 * (framework/local_file_system.py).
 *
 * <p>Without Hadoop's native library, {@link RawLocalFileSystem} runs {@code chmod} in a new process
 * for every file and folder it creates, and {@code readlink} for every link status it is asked
 * (each rename of a Delta commit asks four). Here permissions are set through java.nio, and a path
 * java.nio says is no symbolic link gets the status Hadoop would give it; everything else is
 * Hadoop's own code.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
  /** The permission of each mode bit, lowest first (others' execute is bit 0). */
  private static final PosixFilePermission[] MODE_BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
  };

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if ((mode & ~0777) != 0) {  // a sticky bit, which java.nio cannot set: Hadoop's chmod
      super.setPermission(p, permission);
      return;
    }
    Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < MODE_BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        permissions.add(MODE_BITS[bit]);
      }
    }
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), permissions);
    } catch (UnsupportedOperationException notPosix) {
      super.setPermission(p, permission);
    }
  }

  /**
   * Hadoop's answer for a path that is no symbolic link is its {@link #getFileStatus} (its
   * readlink gets the qualified {@code file:/...} string, so it never finds a link there), and
   * the file-not-found error for a missing one; a link keeps Hadoop's own code.
   */
  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (!Files.isSymbolicLink(pathToFile(f).toPath())) {
      return getFileStatus(f);
    }
    return super.getFileLinkStatus(f);
  }
}
