// Package sops decrypts the YAML, JSON and binary files of a git folder
// that SOPS encrypted for age keys, as Flux's kustomize-controller does
// before it applies them, so that a repository keeps its Secrets in git
// encrypted.
//
// It reads SOPS's own format and checks its MAC over the file as it was
// encrypted, before kustomize or anything else changes it: a file changed
// after it was encrypted is refused, where Flux (without its MAC check)
// applies it. It takes age keys only; a file encrypted for PGP, a cloud
// KMS or Vault alone, the rules SOPS keeps for comments, and SOPS's
// dotenv and INI files, are refused with what to do instead.
package sops

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"filippo.io/age"
	"filippo.io/age/armor"
	yaml "go.yaml.in/yaml/v3"
)

// KeySuffix ends the name of each entry of a decryption Secret that holds
// age identities, as in Flux's: age.agekey.
const KeySuffix = ".agekey"

// ParseKeys reads the age identities (AGE-SECRET-KEY-1…) of one Secret
// entry. Its error never quotes the entry.
func ParseKeys(name string, data []byte) ([]age.Identity, error) {
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("entry %s holds no age identity that age can read (one AGE-SECRET-KEY-1… per line, # for comments)", name)
	}
	return ids, nil
}

// looksEncrypted reports whether data looks like a file SOPS encrypted:
// a top-level sops key (a line that starts with it, or a JSON member) and
// a mac. It does not parse data.
func looksEncrypted(data []byte) bool {
	topLevel := bytes.HasPrefix(data, []byte("sops:")) || bytes.Contains(data, []byte("\nsops:")) || bytes.Contains(data, []byte(`"sops":`))
	return topLevel && bytes.Contains(data, []byte("mac"))
}

// metadata is what Capstan reads of a file's sops mapping.
type metadata struct {
	Age []struct {
		Recipient string `yaml:"recipient"`
		Enc       string `yaml:"enc"`
	} `yaml:"age"`
	PGP                     []yaml.Node `yaml:"pgp"`
	KMS                     []yaml.Node `yaml:"kms"`
	GCPKMS                  []yaml.Node `yaml:"gcp_kms"`
	AzureKV                 []yaml.Node `yaml:"azure_kv"`
	Vault                   []yaml.Node `yaml:"hc_vault"`
	KeyGroups               []yaml.Node `yaml:"key_groups"`
	LastModified            string      `yaml:"lastmodified"`
	MAC                     string      `yaml:"mac"`
	UnencryptedSuffix       string      `yaml:"unencrypted_suffix"`
	EncryptedSuffix         string      `yaml:"encrypted_suffix"`
	UnencryptedRegex        string      `yaml:"unencrypted_regex"`
	EncryptedRegex          string      `yaml:"encrypted_regex"`
	UnencryptedCommentRegex string      `yaml:"unencrypted_comment_regex"`
	EncryptedCommentRegex   string      `yaml:"encrypted_comment_regex"`
	MACOnlyEncrypted        bool        `yaml:"mac_only_encrypted"`

	unencrypted, encrypted *regexp.Regexp
}

// macOnlyEncryptedInit starts the MAC of a file whose MAC covers only its
// encrypted values (mac_only_encrypted), as SOPS starts it, so that the
// two kinds of MAC never match each other.
var macOnlyEncryptedInit = []byte{0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0xb,
	0xb, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69}

// defaultUnencryptedSuffix leaves a key's values unencrypted when no rule
// is written, as SOPS does.
const defaultUnencryptedSuffix = "_unencrypted"

// Decrypt decrypts a file SOPS encrypted, named name, with ids, and
// returns it as sops decrypt writes it, without its sops mapping, with
// the values it decrypted (to be hidden wherever they could be shown). It
// checks the file's MAC first and refuses a file whose MAC does not match.
//
// The name picks how the file is written again, as it picks SOPS's store:
// a .yaml or .yml file is YAML, a .json file is JSON (one that holds
// YAML is refused, as sops decrypt fails on it), and a file of any
// other name that holds SOPS's binary envelope (a data value alone) is
// that value, the file SOPS encrypted whole. Another file of another name
// (one encrypted with sops --input-type) is written as what it holds,
// JSON or YAML.
func Decrypt(name string, data []byte, ids []age.Identity) ([]byte, []string, error) {
	docs, err := documents(data)
	if err != nil {
		return nil, nil, err
	}
	meta, err := extract(docs)
	if err != nil {
		return nil, nil, err
	}
	key, err := dataKey(meta, ids)
	if err != nil {
		return nil, nil, err
	}
	d := &decrypter{meta: meta, key: key, mac: sha512.New()}
	if meta.MACOnlyEncrypted {
		d.mac.Write(macOnlyEncryptedInit)
	}
	for _, doc := range docs {
		if err := d.walk(doc.Content[0], nil); err != nil {
			return nil, nil, err
		}
	}
	stored, err := d.value(meta.MAC, macAAD(meta.LastModified))
	if err != nil {
		return nil, nil, fmt.Errorf("its MAC cannot be read: %w", err)
	}
	if got := fmt.Sprintf("%X", d.mac.Sum(nil)); stored.text != got {
		return nil, nil, errors.New("it was changed after SOPS encrypted it: its MAC does not match its values; edit it with sops, or encrypt it again")
	}
	// NOTE: SOPS writes an empty document as {} with its own mapping;
	// without it, it is empty again.
	if len(docs) > 1 {
		docs = slices.DeleteFunc(docs, func(doc *yaml.Node) bool { return len(doc.Content[0].Content) == 0 })
		if len(docs) == 0 {
			return nil, d.secrets, nil
		}
	}
	switch {
	case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
		// YAML, even when it holds JSON, as sops writes it.
	case strings.HasSuffix(name, ".json"):
		// NOTE: sops decrypt reads a .json file as JSON and fails on
		// YAML; written as JSON here, a YAML stream would keep only its
		// first document, so it is refused.
		if !json.Valid(data) {
			return nil, nil, notJSON(docs)
		}
		out, err := emitJSON(docs[0])
		return out, d.secrets, err
	case isJSON(data):
		if value, ok := binaryData(docs); ok {
			return []byte(value), d.secrets, nil
		}
		out, err := emitJSON(docs[0])
		return out, d.secrets, err
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	for _, doc := range docs {
		literalBlocks(doc)
		if err := enc.Encode(doc); err != nil {
			return nil, nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	return out.Bytes(), d.secrets, nil
}

// notJSON is the error for a .json file that holds YAML (docs, its
// documents left after the empty ones).
func notJSON(docs []*yaml.Node) error {
	what := "YAML"
	if len(docs) > 1 {
		what = fmt.Sprintf("YAML, %d documents,", len(docs))
	}
	return fmt.Errorf("it is named .json but holds %s which sops decrypt does not read as JSON: name it .yaml, or encrypt it from a JSON file", what)
}

// isJSON reports whether data is JSON: its first character opens an object.
func isJSON(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// binaryData is the value of SOPS's binary envelope, {"data": "…"}, which
// SOPS writes for a file of a name it has no store for (a certificate, a
// key, a .txt file), encrypted whole: its one data string is the file.
func binaryData(docs []*yaml.Node) (string, bool) {
	if len(docs) != 1 {
		return "", false
	}
	root := docs[0].Content[0]
	if len(root.Content) != 2 || root.Content[0].Value != "data" || root.Content[1].Kind != yaml.ScalarNode || root.Content[1].ShortTag() != "!!str" {
		return "", false
	}
	return root.Content[1].Value, true
}

// emitJSON writes a decrypted JSON file as JSON again, byte for byte as
// sops decrypt writes it, so that a generator that reads it hashes the
// same text as Flux's: its members in the file's order, each value as Go's
// encoding/json writes it (numbers as float64, <, > and & escaped), and
// indented with tabs.
func emitJSON(doc *yaml.Node) ([]byte, error) {
	var compact bytes.Buffer
	if err := writeJSON(&compact, doc); err != nil {
		return nil, fmt.Errorf("it cannot be written as JSON again: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "\t"); err != nil {
		return nil, fmt.Errorf("it cannot be written as JSON again: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeJSON writes n as compact JSON, in its order.
func writeJSON(w *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(w, n.Content[0])
	case yaml.MappingNode:
		w.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSONValue(w, n.Content[i].Value); err != nil {
				return err
			}
			w.WriteByte(':')
			if err := writeJSON(w, n.Content[i+1]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case yaml.SequenceNode:
		w.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, item); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	case yaml.ScalarNode:
		var v any = n.Value
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return err
			}
			v = b
		case "!!int", "!!float":
			// NOTE: SOPS reads every JSON number as a float64, and
			// writes it back so: 1.50 is 1.5.
			var f float64
			if err := n.Decode(&f); err != nil {
				return err
			}
			v = f
		}
		return writeJSONValue(w, v)
	default:
		return fmt.Errorf("line %d holds what JSON cannot", n.Line)
	}
	return nil
}

// writeJSONValue writes one value as json.Marshal does, as SOPS writes
// each key and value.
func writeJSONValue(w *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Write(b)
	return nil
}

// maxDepth bounds how deeply a file's mappings and lists nest: each value
// is decrypted with the path of keys to it, so a file nested without
// bound would cost without bound.
const maxDepth = 100

// documents parses every document of data, and refuses what SOPS's own
// reading would expand or lose: anchors and aliases, and documents that
// are not mappings.
func documents(data []byte) ([]*yaml.Node, error) {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		doc := &yaml.Node{}
		err := dec.Decode(doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("it is not YAML or JSON: %w", err)
		}
		if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
			return nil, errors.New("a document of it is not a mapping")
		}
		if hasAlias(doc) {
			return nil, errors.New("it uses YAML anchors or aliases, which Capstan does not decrypt: write the values out")
		}
		if depth(doc, 0) > maxDepth {
			return nil, fmt.Errorf("it nests mappings and lists more than %d deep", maxDepth)
		}
		docs = append(docs, doc)
	}
	if len(docs) == 0 {
		return nil, errors.New("it is empty")
	}
	return docs, nil
}

// depth is how deeply n nests, stopping past maxDepth.
func depth(n *yaml.Node, at int) int {
	deepest := at
	if at > maxDepth {
		return at
	}
	for _, c := range n.Content {
		deepest = max(deepest, depth(c, at+1))
	}
	return deepest
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	return slices.ContainsFunc(n.Content, hasAlias)
}

// extract reads the sops mapping of the first document and removes it
// from every document, as SOPS does.
func extract(docs []*yaml.Node) (*metadata, error) {
	var meta *metadata
	for i, doc := range docs {
		root := doc.Content[0]
		for j := 0; j+1 < len(root.Content); j += 2 {
			if root.Content[j].Value != "sops" {
				continue
			}
			if i == 0 {
				meta = &metadata{}
				if err := root.Content[j+1].Decode(meta); err != nil {
					return nil, fmt.Errorf("its sops mapping cannot be read: %w", err)
				}
			}
			root.Content = slices.Delete(root.Content, j, j+2)
			break
		}
	}
	if meta == nil {
		return nil, errors.New("its first document has no sops mapping: it is not encrypted by SOPS")
	}
	if meta.MAC == "" {
		return nil, errors.New("its sops mapping has no mac")
	}
	if meta.UnencryptedCommentRegex != "" || meta.EncryptedCommentRegex != "" {
		return nil, errors.New("it was encrypted with a comment rule (encrypted_comment_regex or unencrypted_comment_regex), which Capstan does not read: encrypt it with a key rule instead (encrypted_regex)")
	}
	if len(meta.KeyGroups) > 0 {
		return nil, errors.New("it was encrypted for key groups (Shamir's secret sharing), which Capstan does not read: encrypt it for age recipients")
	}
	if meta.UnencryptedSuffix == "" && meta.EncryptedSuffix == "" && meta.UnencryptedRegex == "" && meta.EncryptedRegex == "" {
		meta.UnencryptedSuffix = defaultUnencryptedSuffix
	}
	var err error
	if meta.UnencryptedRegex != "" {
		if meta.unencrypted, err = regexp.Compile(meta.UnencryptedRegex); err != nil {
			return nil, fmt.Errorf("its unencrypted_regex is not a regular expression: %w", err)
		}
	}
	if meta.EncryptedRegex != "" {
		if meta.encrypted, err = regexp.Compile(meta.EncryptedRegex); err != nil {
			return nil, fmt.Errorf("its encrypted_regex is not a regular expression: %w", err)
		}
	}
	return meta, nil
}

// dataKey opens the file's data key with the first identity that can.
func dataKey(meta *metadata, ids []age.Identity) ([]byte, error) {
	if len(meta.Age) == 0 {
		var kinds []string
		for _, k := range []struct {
			name string
			keys []yaml.Node
		}{{"PGP", meta.PGP}, {"AWS KMS", meta.KMS}, {"GCP KMS", meta.GCPKMS}, {"Azure Key Vault", meta.AzureKV}, {"Vault", meta.Vault}} {
			if len(k.keys) > 0 {
				kinds = append(kinds, k.name)
			}
		}
		if len(kinds) == 0 {
			return nil, errors.New("its sops mapping names no age recipient: encrypt it for an age recipient and put its key in the Secret")
		}
		return nil, fmt.Errorf("it is encrypted for %s only, and Capstan decrypts with age keys: add an age recipient (sops updatekeys) and put its key in the Secret",
			strings.Join(kinds, ", "))
	}
	var recipients []string
	for _, stanza := range meta.Age {
		recipients = append(recipients, stanza.Recipient)
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(stanza.Enc)), ids...)
		if err != nil {
			continue
		}
		key, err := io.ReadAll(io.LimitReader(r, 1024))
		if err == nil && len(key) == 32 {
			return key, nil
		}
	}
	return nil, fmt.Errorf("no age key of the Secret opens it: it is encrypted for %s; add the key of one of them to the Secret", strings.Join(recipients, ", "))
}

// macAAD is the additional data the MAC is encrypted with: the file's
// lastmodified time, in RFC 3339 as SOPS writes it.
func macAAD(lastModified string) string {
	if t, err := time.Parse(time.RFC3339, lastModified); err == nil {
		return t.Format(time.RFC3339)
	}
	return lastModified
}

// decrypter walks one file's documents in order, as SOPS does, decrypting
// its values in place and hashing them into the MAC.
type decrypter struct {
	meta    *metadata
	key     []byte
	mac     hash.Hash
	secrets []string
}

// walk decrypts the values under n; path is the keys that lead to it
// (a list's items share their list's path, as in SOPS).
func (d *decrypter) walk(n *yaml.Node, path []string) error {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			k.HeadComment, k.LineComment, k.FootComment = "", "", ""
			// NOTE: one stack of keys; a value reads it and keeps none.
			if err := d.walk(n.Content[i+1], append(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		// NOTE: SOPS writes a comment inside a list as an item of type
		// comment, outside the MAC; it is a comment again, so dropped.
		n.Content = slices.DeleteFunc(n.Content, func(item *yaml.Node) bool {
			m := encryptedValue.FindStringSubmatch(item.Value)
			return item.Kind == yaml.ScalarNode && m != nil && m[4] == "comment"
		})
		for _, item := range n.Content {
			if err := d.walk(item, path); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return d.scalar(n, path)
	}
	return nil
}

// scalar decrypts one value, if its path says it is encrypted, and hashes
// it as SOPS does: its text, with booleans as True and False.
func (d *decrypter) scalar(n *yaml.Node, path []string) error {
	if n.Tag == "!!null" {
		return nil
	}
	encrypted := d.encrypted(path)
	var text string
	if encrypted {
		v, err := d.value(n.Value, strings.Join(path, ":")+":")
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(path, "."), err)
		}
		n.Value, n.Tag, n.Style = v.text, v.tag, 0
		if v.tag == "!!str" && !strings.Contains(v.text, "${") {
			// NOTE: quoted, so that no reader takes "yes" or "0755" for
			// anything but the string it was. One that holds a variable
			// stays plain, so that the substitution may give it its type
			// (replicas: ${replicas}), as with the text SOPS writes.
			n.Style = yaml.DoubleQuotedStyle
		}
		text = v.hashed
		if v.text != "" && !naming(path) {
			d.secrets = append(d.secrets, secretParts(v.text)...)
		}
	} else {
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(path, "."), err)
		}
		text = hashText(v)
	}
	if !d.meta.MACOnlyEncrypted || encrypted {
		// NOTE: a hash never fails to write.
		_, _ = io.WriteString(d.mac, text)
	}
	return nil
}

// naming reports whether path names an object (its apiVersion, kind,
// name or namespace): a file encrypted whole has them encrypted too, and
// Capstan never hides names, by which people and the controller find
// objects.
func naming(path []string) bool {
	switch len(path) {
	case 1:
		return path[0] == "apiVersion" || path[0] == "kind"
	case 2:
		return path[0] == "metadata" && (path[1] == "name" || path[1] == "namespace")
	}
	return false
}

// encrypted says whether the value at path is encrypted, by the file's
// rules, as SOPS decides it.
func (d *decrypter) encrypted(path []string) bool {
	m := d.meta
	encrypted := m.UnencryptedSuffix == "" || !slices.ContainsFunc(path, func(k string) bool { return strings.HasSuffix(k, m.UnencryptedSuffix) })
	if m.EncryptedSuffix != "" {
		encrypted = slices.ContainsFunc(path, func(k string) bool { return strings.HasSuffix(k, m.EncryptedSuffix) })
	}
	if m.unencrypted != nil && slices.ContainsFunc(path, m.unencrypted.MatchString) {
		encrypted = false
	}
	if m.encrypted != nil {
		encrypted = slices.ContainsFunc(path, m.encrypted.MatchString)
	}
	return encrypted
}

// hashText is a plain value's text in the MAC: SOPS's own.
func hashText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		if v {
			return "True"
		}
		return "False"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case time.Time:
		text, _ := v.MarshalText()
		return string(text)
	default:
		return fmt.Sprint(v)
	}
}

// plain is one decrypted value: its text and YAML tag in the output, and
// its text in the MAC.
type plain struct {
	text, tag, hashed string
}

// encryptedValue is SOPS's form of one encrypted value.
var encryptedValue = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]`)

// value decrypts one ENC[AES256_GCM,…] value with the data key; aad is
// the path of keys that leads to it, each followed by a colon. An empty
// value is empty, as SOPS leaves it unencrypted.
func (d *decrypter) value(text, aad string) (plain, error) {
	if text == "" {
		return plain{tag: "!!str"}, nil
	}
	m := encryptedValue.FindStringSubmatch(text)
	if m == nil {
		return plain{}, errors.New("the value should be encrypted by its file's rules, and is not: encrypt the file again with sops")
	}
	var parts [3][]byte
	for i := range parts {
		b, err := base64.StdEncoding.DecodeString(m[i+1])
		if err != nil {
			return plain{}, errors.New("the encrypted value is not base64")
		}
		parts[i] = b
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	block, err := aes.NewCipher(d.key)
	if err != nil {
		return plain{}, err
	}
	if len(iv) == 0 {
		return plain{}, errors.New("the encrypted value has no IV")
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return plain{}, err
	}
	out, err := gcm.Open(nil, iv, append(slices.Clip(data), tag...), []byte(aad))
	if err != nil {
		return plain{}, errors.New("the value does not decrypt with the file's key: it was changed, or moved to another key, after SOPS encrypted it")
	}
	s := string(out)
	switch typ := m[4]; typ {
	case "str", "bytes":
		return plain{text: s, tag: "!!str", hashed: s}, nil
	case "int":
		if _, err := strconv.Atoi(s); err != nil {
			return plain{}, errors.New("an encrypted int is not a number")
		}
		return plain{text: s, tag: "!!int", hashed: s}, nil
	case "float":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return plain{}, errors.New("an encrypted float is not a number")
		}
		text := s
		switch {
		case math.IsNaN(f):
			text = ".nan"
		case math.IsInf(f, 1):
			text = ".inf"
		case math.IsInf(f, -1):
			text = "-.inf"
		}
		return plain{text: text, tag: "!!float", hashed: strconv.FormatFloat(f, 'f', -1, 64)}, nil
	case "bool":
		b, err := strconv.ParseBool(s)
		if err != nil {
			return plain{}, errors.New("an encrypted bool is not true or false")
		}
		return plain{text: strconv.FormatBool(b), tag: "!!bool", hashed: hashText(b)}, nil
	case "time":
		var t time.Time
		if err := t.UnmarshalText(out); err != nil {
			return plain{}, errors.New("an encrypted time is not a time")
		}
		return plain{text: s, tag: "!!timestamp", hashed: s}, nil
	default:
		return plain{}, fmt.Errorf("an encrypted value of type %q, which Capstan does not read", typ)
	}
}

// literalBlocks writes every folded block scalar under n as a literal
// one, which holds the same text: yaml.v3 writes some folded blocks back
// with a line more. It writes flow mappings and lists (a JSON file's) as
// blocks, as SOPS writes YAML.
func literalBlocks(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Style&yaml.FoldedStyle != 0 {
		n.Style = n.Style&^yaml.FoldedStyle | yaml.LiteralStyle
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style &^= yaml.FlowStyle
	}
	for _, c := range n.Content {
		literalBlocks(c)
	}
}

// expression is a variable of a later substitution, ${…}.
var expression = regexp.MustCompile(`\$\{[^}]*\}`)

// secretParts is a decrypted value to hide, and, when it holds variables,
// its text around them and each of its expressions: once substituted, the
// value is not the text it was, and a substitution's error quotes the
// expression it could not take (${Kd93fPx} is not defined).
func secretParts(v string) []string {
	if !strings.Contains(v, "${") {
		return []string{v}
	}
	parts := []string{v}
	for _, seg := range expression.Split(v, -1) {
		parts = append(parts, strings.Split(seg, "${")...)
	}
	for i := strings.Index(v, "${"); i >= 0; {
		expr := v[i:]
		if end := strings.IndexByte(expr, '}'); end >= 0 {
			expr = expr[:end+1]
		}
		parts = append(parts, expr, cutExpr(expr))
		next := strings.Index(v[i+2:], "${")
		if next < 0 {
			break
		}
		i += 2 + next
	}
	return parts
}

// cutExpr is the part of an expression a substitution's error quotes: its
// first line, and at most 60 bytes of it.
//
// NOTE: it follows the render's quoteExpr, which sops cannot import (the
// render imports sops); TestDecryptedTextLeavesNoTraceInSubstitutionErrors
// fails when the two part.
func cutExpr(expr string) string {
	if i := strings.IndexByte(expr, '\n'); i >= 0 {
		expr = expr[:i]
	}
	if len(expr) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(expr[cut]) {
			cut--
		}
		expr = expr[:cut]
	}
	return expr
}
