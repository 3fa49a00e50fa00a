package importer

// stripJSONC turns JSON with comments (the "JSONC" VS Code reads, which Cursor and
// Claude Code files sometimes carry too) into plain JSON of exactly the same length:
// line comments (// …), block comments (/* … */) and trailing commas before } or ] are
// overwritten with spaces, newlines inside comments are kept, and a leading UTF-8 byte
// order mark becomes spaces. Keeping every other byte where it was lets a JSON syntax
// error's offset be reported as a line and column of the file the user wrote.
//
// Strings are copied as they are, escapes included, so "http://x" and "/* not a
// comment */" inside a string survive. An unterminated block comment is blanked to the
// end, which leaves the JSON decoder to report the missing closing bracket.
func stripJSONC(src []byte) []byte {
	out := make([]byte, len(src))
	copy(out, src)
	if len(out) >= 3 && out[0] == 0xEF && out[1] == 0xBB && out[2] == 0xBF {
		out[0], out[1], out[2] = ' ', ' ', ' '
	}
	lastComma := -1 // a comma not yet followed by anything but space and comments
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			lastComma = -1
			i = skipString(out, i)
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out); i++ {
				if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
					out[i], out[i+1] = ' ', ' '
					i++
					break
				}
				if out[i] != '\n' && out[i] != '\r' {
					out[i] = ' '
				}
			}
		case c == ',':
			lastComma = i
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			lastComma = -1
		}
	}
	return out
}

// skipString returns the index of the quote that closes the string opening at b[i], or
// the last index when it is not closed.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b) - 1
}
