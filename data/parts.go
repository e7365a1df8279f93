package data

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dgtune/dgtune/data/chat"
	"github.com/dgtune/dgtune/imageproc"
)

// message is a chat message with the images its content lists, in order.
type message struct {
	chat.Message
	images []imageRef
}

// imageRef is an image part before its file is read: a path relative to the data file, or
// the image's bytes (parquet). where locates it in the row for error messages.
type imageRef struct {
	where string
	path  string
	data  []byte
}

// Content part types.
const (
	partText  = "text"
	partImage = "image"
)

// messageFrom reads role and content from any row-like value (a JSON object or a
// parquet struct), so that both report the same problems. Content is a string, or a
// list of parts (see contentFromParts).
func messageFrom(r row) (message, error) {
	var m message
	if !r.has("role") {
		return m, errMissing("role")
	}
	role, err := r.str("role")
	if err != nil {
		return m, err
	}
	m.Role = role
	if !r.has("content") {
		return m, errMissing("content")
	}
	if !r.isList("content") {
		m.Content, err = r.str("content")
		return m, err
	}
	ps, err := r.parts("content")
	if err != nil {
		return m, err
	}
	m.Content, m.images, err = contentFromParts(ps)
	return m, err
}

// part is one element of a content list.
type part struct {
	typ, text, path string
	data            []byte
}

// partFrom reads {"type": "text", "text": ...} or {"type": "image", "path": ...} (the
// path may also be given as "image", HF's key); parquet parts may instead carry the
// image's bytes as binary "bytes" or "image" (also an HF Image struct<bytes, path>).
func partFrom(r row) (part, error) {
	var p part
	if !r.has("type") {
		return p, errMissing("type")
	}
	typ, err := r.str("type")
	if err != nil {
		return p, err
	}
	p.typ = typ
	switch typ {
	case partText:
		if !r.has("text") {
			return p, errMissing("text")
		}
		p.text, err = r.str("text")
		return p, err
	case partImage:
		for _, key := range []string{"path", "image", "bytes"} {
			if !r.has(key) {
				continue
			}
			if b, ok := r.binary(key); ok {
				p.data = b
				return p, nil
			}
			if p.path, err = r.str(key); err != nil {
				return p, err
			}
			if p.path == "" {
				return p, fmt.Errorf("empty %q", key)
			}
			return p, nil
		}
		return p, errors.New(`image part needs "path" (a file relative to the data file) or the image's bytes`)
	}
	return p, fmt.Errorf("unknown part type %q (want %q or %q)", typ, partText, partImage)
}

// contentFromParts joins parts into the message text as the upstream template does:
// each text part trimmed, each image part replaced by the <|image|> placeholder, with
// nothing in between. The images come back in placeholder order.
func contentFromParts(ps []part) (string, []imageRef, error) {
	var b strings.Builder
	var images []imageRef
	for i, p := range ps {
		switch p.typ {
		case partText:
			// A literal placeholder would pair with no image and shift every later one.
			if strings.Contains(p.text, chat.ImagePlaceholder) {
				return "", nil, fmt.Errorf("\"content\"[%d]: text contains the image placeholder %s; use an image part", i, chat.ImagePlaceholder)
			}
			b.WriteString(strings.TrimSpace(p.text))
		case partImage:
			b.WriteString(chat.ImagePlaceholder)
			images = append(images, imageRef{where: fmt.Sprintf("content[%d]", i), path: p.path, data: p.data})
		}
	}
	return b.String(), images, nil
}

// sourceFor reads and checks an image of a row of file (paths are relative to the
// file's directory). A path used by several rows is read once.
func (c *collector) sourceFor(ref imageRef) (*imageproc.Source, error) {
	if ref.data != nil {
		return imageproc.NewSource("image bytes", ref.data)
	}
	path := ref.path
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(c.file), path)
	}
	path = filepath.Clean(path)
	if s, ok := c.images[path]; ok {
		return s, nil
	}
	s, err := imageproc.Open(path)
	if err != nil {
		return nil, err
	}
	if c.images == nil {
		c.images = map[string]*imageproc.Source{}
	}
	c.images[path] = s
	return s, nil
}

// sources turns a row's image references into checked images.
func (c *collector) sources(refs []imageRef) ([]*imageproc.Source, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	out := make([]*imageproc.Source, len(refs))
	for i, ref := range refs {
		s, err := c.sourceFor(ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref.where, err)
		}
		out[i] = s
	}
	return out, nil
}
