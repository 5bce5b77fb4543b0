package org.pingo.examples;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * A COMMAND_LINE action: {@code Synth LABEL [INPUT_DIR ...] OUTPUT_DIR}.
 * Follows Pingo's argument contract and writes OUTPUT_DIR/part-00000 naming its label,
 * the system property {@code pingo.greeting} and its inputs.
 */
public final class Synth {
    /** An HDFS path on the Hadoop emulator's disk (PINGO_EMULATOR_HDFS_ROOT); else as given. */
    static Path local(String path) {
        String root = System.getenv("PINGO_EMULATOR_HDFS_ROOT");
        if (path.startsWith("hdfs://")) {
            int slash = path.indexOf('/', "hdfs://".length());
            path = slash < 0 ? "/" : path.substring(slash);
        }
        return root != null && path.startsWith("/") ? Paths.get(root, path.substring(1)) : Paths.get(path);
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2) {
            System.err.println("usage: Synth LABEL [INPUT_DIR ...] OUTPUT_DIR");
            System.exit(2);
        }
        Path out = local(args[args.length - 1]);
        Files.createDirectories(out);
        StringBuilder text = new StringBuilder(args[0]).append('\n')
            .append(System.getProperty("pingo.greeting", "-")).append('\n');
        for (String in : Arrays.copyOfRange(args, 1, args.length - 1)) {
            text.append(in).append('\n');
        }
        Files.write(out.resolve("part-00000"), text.toString().getBytes(StandardCharsets.UTF_8));
    }
}
