package search

import "strings"

// Shapes: what a query's words look like, beyond what they say. A person names a file
// ("notes.txt"), a web address ("example.com", "https://…") or a path ("~/Documents")
// without saying "file", "URL" or "path"; the tools say those words. So a query word of
// such a shape also looks for the word, at the related words' weight. Only the query
// is read this way (a description that names "package.json" is not about files), and
// the rules are few and general: a known file extension, a web scheme or a
// well-known top-level domain, a leading "/", "~/" or "./".

// fileExtensions are extensions that mark a file name.
var fileExtensions = map[string]bool{}

// webDomains are top-level domains that mark a host name (only the common ones: "a.co"
// is a host, "a.go" a file).
var webDomains = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`txt md markdown json yaml yml toml ini conf cfg env xml csv tsv log
		go py js ts tsx jsx rb rs java kt c h cpp hpp cs php sh bash sql html htm css scss
		pdf doc docx xls xlsx ppt pptx odt rtf epub
		jpg jpeg png gif svg webp bmp tiff ico heic mp3 wav flac ogg mp4 mov avi mkv webm
		zip tar gz tgz bz2 xz 7z rar jar whl deb rpm dmg iso lock`) {
		fileExtensions[e] = true
	}
	for _, d := range strings.Fields(`com org net io dev ai app co edu gov info biz me us uk de fr eu`) {
		webDomains[d] = true
	}
}

// The terms of the words shapes imply.
var fileTerm, urlTerm, pathTerm = Terms("file")[0], Terms("url")[0], Terms("path")[0]

// shapeWords calls f with the term of the word each shaped token of query implies
// ("file", "url", "path"), at most once per word.
func shapeWords(query string, f func(term string)) {
	var file, url, path bool
	for rest := query; rest != ""; {
		// The next token: a run of non-space bytes (no allocation: strings.Fields would).
		start := 0
		for start < len(rest) && isSpace(rest[start]) {
			start++
		}
		end := start
		for end < len(rest) && !isSpace(rest[end]) {
			end++
		}
		tok := strings.Trim(rest[start:end], `"'()[]{}<>,;:!?`)
		rest = rest[end:]
		if tok == "" {
			continue
		}
		if strings.Contains(tok, "://") || len(tok) > 4 && strings.EqualFold(tok[:4], "www.") {
			url = true
			continue
		}
		if strings.HasPrefix(tok, "/") || strings.HasPrefix(tok, "~/") || strings.HasPrefix(tok, "./") || strings.HasPrefix(tok, "../") {
			path = true
		}
		dot := strings.LastIndexByte(tok, '.')
		if dot <= 0 || dot == len(tok)-1 || len(tok)-dot-1 > 8 {
			continue
		}
		var buf [8]byte
		ext := buf[:0]
		for i := dot + 1; i < len(tok); i++ {
			c := tok[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			ext = append(ext, c)
		}
		switch {
		case fileExtensions[string(ext)]:
			file = true
		case webDomains[string(ext)] && strings.IndexByte(tok, '@') < 0:
			url = true
		}
	}
	if file {
		f(fileTerm)
	}
	if url {
		f(urlTerm)
	}
	if path {
		f(pathTerm)
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
