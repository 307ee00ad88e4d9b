package awsfake

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"time"

	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/document"
	"github.com/aws/smithy-go/traits"
)

// jsonSerializer is a smithy.ShapeSerializer writing the JSON of the
// awsJson1_0, awsJson1_1 and restJson1 protocols. SDK types generated with
// schemas (EKS, SSM, ...) serialize themselves through it, so keys are the
// model's member names (or jsonName) and timestamps follow the model.
type jsonSerializer struct {
	buf   []byte
	stack []jsonFrame
}

type jsonFrame struct {
	object bool // inside a struct or map: values need keys
	n      int  // values written so far at this level
	keyed  bool // a map key was just written
}

var _ smithy.ShapeSerializer = (*jsonSerializer)(nil)

func newJSONSerializer() *jsonSerializer { return &jsonSerializer{} }

func (s *jsonSerializer) Bytes() []byte { return s.buf }

// prefix writes the comma and key that precede a value.
func (s *jsonSerializer) prefix(schema *smithy.Schema) {
	if len(s.stack) == 0 {
		return
	}
	top := &s.stack[len(s.stack)-1]
	if top.keyed { // map value after WriteKey
		top.keyed = false
		return
	}
	if top.n > 0 {
		s.buf = append(s.buf, ',')
	}
	top.n++
	if top.object {
		s.buf = appendJSONString(s.buf, memberKey(schema))
		s.buf = append(s.buf, ':')
	}
}

func memberKey(schema *smithy.Schema) string {
	if schema == nil {
		return ""
	}
	if jn, ok := smithy.SchemaTrait[*traits.JSONName](schema); ok && jn.Name != "" {
		return jn.Name
	}
	return schema.MemberName()
}

func (s *jsonSerializer) raw(schema *smithy.Schema, b []byte) {
	s.prefix(schema)
	s.buf = append(s.buf, b...)
}

func (s *jsonSerializer) WriteInt8(sc *smithy.Schema, v int8)   { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt16(sc *smithy.Schema, v int16) { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt32(sc *smithy.Schema, v int32) { s.WriteInt64(sc, int64(v)) }
func (s *jsonSerializer) WriteInt64(sc *smithy.Schema, v int64) {
	s.raw(sc, strconv.AppendInt(nil, v, 10))
}
func (s *jsonSerializer) WriteFloat32(sc *smithy.Schema, v float32) { s.WriteFloat64(sc, float64(v)) }
func (s *jsonSerializer) WriteFloat64(sc *smithy.Schema, v float64) {
	switch {
	case math.IsNaN(v):
		s.raw(sc, []byte(`"NaN"`))
	case math.IsInf(v, 1):
		s.raw(sc, []byte(`"Infinity"`))
	case math.IsInf(v, -1):
		s.raw(sc, []byte(`"-Infinity"`))
	default:
		s.raw(sc, strconv.AppendFloat(nil, v, 'g', -1, 64))
	}
}
func (s *jsonSerializer) WriteBool(sc *smithy.Schema, v bool) { s.raw(sc, strconv.AppendBool(nil, v)) }
func (s *jsonSerializer) WriteString(sc *smithy.Schema, v string) {
	s.raw(sc, appendJSONString(nil, v))
}

func appendJSONString(dst []byte, v string) []byte {
	b, _ := json.Marshal(v) // a string always marshals
	return append(dst, b...)
}
func (s *jsonSerializer) WriteBigInt(sc *smithy.Schema, v *big.Int) {
	s.raw(sc, []byte(v.String()))
}
func (s *jsonSerializer) WriteBigFloat(sc *smithy.Schema, v *big.Float) {
	s.raw(sc, []byte(v.Text('g', -1)))
}
func (s *jsonSerializer) WriteBlob(sc *smithy.Schema, v []byte) {
	s.WriteString(sc, base64.StdEncoding.EncodeToString(v))
}

// WriteTime honours the timestampFormat trait; the JSON protocols'
// default is epoch seconds.
func (s *jsonSerializer) WriteTime(sc *smithy.Schema, v time.Time) {
	format := "epoch-seconds"
	if tf, ok := smithy.SchemaTrait[*traits.TimestampFormat](sc); ok && tf.Format != "" {
		format = tf.Format
	}
	switch format {
	case "date-time":
		s.WriteString(sc, v.UTC().Format(time.RFC3339Nano))
	case "http-date":
		s.WriteString(sc, v.UTC().Format(time.RFC1123))
	default:
		s.raw(sc, strconv.AppendFloat(nil, float64(v.UnixMilli())/1000, 'f', -1, 64))
	}
}

func (s *jsonSerializer) WriteUnion(schema, variant *smithy.Schema) {
	s.WriteStruct(schema)
	// The variant's value follows as a keyed member.
	_ = variant
}
func (s *jsonSerializer) CloseUnion() { s.CloseStruct() }

func (s *jsonSerializer) WriteDocument(sc *smithy.Schema, v document.Value) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	s.raw(sc, b)
}

func (s *jsonSerializer) WriteNil(sc *smithy.Schema) { s.raw(sc, []byte("null")) }

func (s *jsonSerializer) WriteStruct(sc *smithy.Schema) {
	s.prefix(sc)
	s.buf = append(s.buf, '{')
	s.stack = append(s.stack, jsonFrame{object: true})
}

func (s *jsonSerializer) CloseStruct() { s.close('}') }

func (s *jsonSerializer) WriteList(sc *smithy.Schema) {
	s.prefix(sc)
	s.buf = append(s.buf, '[')
	s.stack = append(s.stack, jsonFrame{})
}

func (s *jsonSerializer) CloseList() { s.close(']') }

func (s *jsonSerializer) WriteMap(sc *smithy.Schema) {
	s.prefix(sc)
	s.buf = append(s.buf, '{')
	s.stack = append(s.stack, jsonFrame{object: true})
}

// WriteKey writes a map key; the next Write* call is its value.
func (s *jsonSerializer) WriteKey(_ *smithy.Schema, key string) {
	top := &s.stack[len(s.stack)-1]
	if top.n > 0 {
		s.buf = append(s.buf, ',')
	}
	top.n++
	s.buf = appendJSONString(s.buf, key)
	s.buf = append(s.buf, ':')
	top.keyed = true
}

func (s *jsonSerializer) CloseMap() { s.close('}') }

func (s *jsonSerializer) close(c byte) {
	if len(s.stack) > 0 {
		s.stack = s.stack[:len(s.stack)-1]
	}
	s.buf = append(s.buf, c)
}
