package fed.hive3;

import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Runs a main class inside a URLClassLoader that holds the classpath listed in a file, and makes
 * that loader the thread's context loader. Hive 3 casts its class loader to URLClassLoader
 * (SessionState, Utilities); since Java 9 the application loader is not one.
 *
 * <p>Usage: {@code UrlLauncher CLASSPATH_FILE MAIN_CLASS [ARGS...]}
 */
public final class UrlLauncher {
  private UrlLauncher() {}

  public static void main(String[] args) throws Exception {
    String listed = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8).trim();
    List<URL> urls = new ArrayList<>();
    for (String entry : listed.split(File.pathSeparator)) {
      if (!entry.isEmpty()) {
        urls.add(new File(entry).toURI().toURL());
      }
    }
    URLClassLoader loader = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
    Thread.currentThread().setContextClassLoader(loader);
    Method main = Class.forName(args[1], true, loader).getMethod("main", String[].class);
    main.invoke(null, (Object) Arrays.copyOfRange(args, 2, args.length));
  }
}
