// SPDX-License-Identifier: MIT
// The Java program of the runtimes guest test (tests/guest/runtimes.sh): COUNT strings of LEN
// Latin-1 characters on the JVM's heap (G1: reserved, then committed as it grows), a checksum as
// they are built, "built", then, once the file GO exists, every string read back and both
// checksums printed, as the test's Node.js and Python programs do.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

public final class Hold {
	private static int sum(String s, int h) {
		for (int k = 0; k < s.length(); k += 7)
			h = h * 31 + s.charAt(k);
		return h;
	}

	private static String tag(int i) {
		return Integer.toString(i, 36) + ":";
	}

	public static void main(String[] args) throws Exception {
		int count = Integer.parseInt(args[0]);
		int len = Integer.parseInt(args[1]);
		Path go = Path.of(args[2]);
		byte[] buf = new byte[len];
		String[] held = new String[count];
		int made = 0;
		for (int i = 0; i < count; i++) {
			Arrays.fill(buf, (byte) (97 + i % 26));
			byte[] t = tag(i).getBytes(StandardCharsets.ISO_8859_1);
			System.arraycopy(t, 0, buf, 0, t.length);
			held[i] = new String(buf, StandardCharsets.ISO_8859_1);
			made = sum(held[i], made);
		}
		Runtime rt = Runtime.getRuntime();
		System.out.printf("built strings=%d heap_used=%.1fM%n", count,
				  (rt.totalMemory() - rt.freeMemory()) / 1048576.0);
		System.out.flush();
		while (!Files.exists(go))
			Thread.sleep(200);
		int read = 0, bad = 0;
		for (int i = 0; i < count; i++) {
			read = sum(held[i], read);
			if (held[i].length() != len || !held[i].startsWith(tag(i)))
				bad++;
		}
		System.out.printf("checksum made=%d read=%d bad=%d%n", made, read, bad);
		System.out.flush();
	}
}
