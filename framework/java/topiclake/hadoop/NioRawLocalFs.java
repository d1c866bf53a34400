package topiclake.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.LinkOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * Hadoop's {@code RawLocalFs} (FileContext's {@code file:}, where Delta's log store writes and renames
 * commits) over {@link NioRawLocalFileSystem}: {@code fs.AbstractFileSystem.file.impl}. RawLocalFs's own
 * constructors are not public, so its three answers are repeated here.
 *
 * <p>A file is renamed onto a name no file has atomically ({@link #renameInternal}): Hadoop's local
 * rename replaces a file that is there, so a Delta commit renamed into place after its log store saw
 * the version free overwrote a commit of that version made in between by another process (another
 * JVM's, or topiclake's own, which takes its name with a hard link).
 */
public class NioRawLocalFs extends DelegateToFileSystem {
  public NioRawLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new NioRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
  }

  @Override
  public int getUriDefaultPort() {
    return -1;
  }

  @Override
  public FsServerDefaults getServerDefaults(Path f) throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }

  @Override
  @Deprecated
  public FsServerDefaults getServerDefaults() throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }

  /**
   * A regular file renamed as a hard link under the new name, which the file system refuses when the
   * name is taken (then {@link FileAlreadyExistsException}, as Hadoop's own check before this call
   * throws), and the old name removed. A folder, or a file system without hard links: Hadoop's rename.
   */
  @Override
  public void renameInternal(Path src, Path dst) throws IOException {
    java.nio.file.Path from = new java.io.File(src.toUri().getPath()).toPath();
    java.nio.file.Path to = new java.io.File(dst.toUri().getPath()).toPath();
    if (!Files.isRegularFile(from, LinkOption.NOFOLLOW_LINKS)) {
      super.renameInternal(src, dst);
      return;
    }
    try {
      Files.createLink(to, from);
    } catch (java.nio.file.FileAlreadyExistsException taken) {
      throw new FileAlreadyExistsException("rename destination " + dst + " already exists.");
    } catch (UnsupportedOperationException | IOException noHardLinks) {
      super.renameInternal(src, dst);
      return;
    }
    Files.delete(from);
  }

  @Override
  public boolean isValidName(String src) {
    return true;  // as RawLocalFs: any name the local file system takes
  }
}
