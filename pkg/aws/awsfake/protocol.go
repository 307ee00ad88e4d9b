package awsfake

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	smithy "github.com/aws/smithy-go"
)

// protocol is an AWS wire protocol.
type protocol int

const (
	ec2Query  protocol = iota // form POST, XML, lists as <item>
	awsQuery                  // form POST, XML with <XResult>, lists as <member>
	restJSON1                 // method + path, JSON body
	awsJSON10                 // POST /, X-Amz-Target, JSON
	awsJSON11
)

// serviceInfo is what the server must know to speak for a service.
type serviceInfo struct {
	protocol     protocol
	xmlns        string            // query protocols
	names        map[string]string // query protocols: "GoType.GoField" -> element name (see gennames)
	targetPrefix string            // JSON-RPC protocols
	// queryErrors are the awsQuery error codes of a JSON service that
	// was awsQuery before (SQS): it sends them in X-Amzn-Query-Error, and
	// the SDK reports them as the error code.
	queryErrors map[string]string
}

// services is keyed by SigV4 signing name. The IAM, SQS and EventBridge
// entries are ready for their handler files.
var services = map[string]serviceInfo{
	"ec2":         {protocol: ec2Query, xmlns: "http://ec2.amazonaws.com/doc/2016-11-15/", names: ec2Names},
	"autoscaling": {protocol: awsQuery, xmlns: "http://autoscaling.amazonaws.com/doc/2011-01-01/", names: autoscalingNames},
	"sts":         {protocol: awsQuery, xmlns: "https://sts.amazonaws.com/doc/2011-06-15/", names: stsNames},
	"iam":         {protocol: awsQuery, xmlns: "https://iam.amazonaws.com/doc/2010-05-08/", names: iamNames},
	"eks":         {protocol: restJSON1},
	"ssm":         {protocol: awsJSON11, targetPrefix: "AmazonSSM"},
	"sqs": {protocol: awsJSON10, targetPrefix: "AmazonSQS", queryErrors: map[string]string{
		"QueueDoesNotExist": "AWS.SimpleQueueService.NonExistentQueue", "QueueNameExists": "QueueAlreadyExists"}},
	"events":  {protocol: awsJSON11, targetPrefix: "AWSEvents"},
	"pricing": {protocol: awsJSON11, targetPrefix: "AWSPriceListService"},
}

// Error is an AWS error response: a real AWS error code, its message and
// the HTTP status the service answers it with.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Common errors, by the codes AWS uses.
func validationError(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, "ValidationError", format, args...)
}

func throttled(p protocol) *Error {
	switch p {
	case ec2Query:
		return errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
	case awsQuery:
		return errorf(http.StatusBadRequest, "Throttling", "Rate exceeded")
	case restJSON1:
		return errorf(http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded")
	default:
		return errorf(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
	}
}

func accessDenied(p protocol, caller, service, action string) *Error {
	msg := fmt.Sprintf("User: %s is not authorized to perform: %s:%s because no identity-based policy allows the %s:%s action", caller, service, action, service, action)
	switch p {
	case ec2Query:
		return errorf(http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation. %s", msg)
	case awsQuery:
		return errorf(http.StatusForbidden, "AccessDenied", "%s", msg)
	case restJSON1:
		return errorf(http.StatusForbidden, "AccessDeniedException", "%s", msg)
	default:
		return errorf(http.StatusBadRequest, "AccessDeniedException", "%s", msg)
	}
}

func invalidActionCode(p protocol) string {
	switch p {
	case ec2Query:
		return "InvalidAction"
	case awsQuery:
		return "InvalidAction"
	default:
		return "UnknownOperationException"
	}
}

func (s *Server) writeError(w http.ResponseWriter, c *call, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = errorf(http.StatusInternalServerError, "InternalFailure", "%v", err)
	}
	id := s.nextRequestID()
	w.Header().Set("X-Amzn-RequestId", id)
	switch c.proto {
	case ec2Query:
		send(w, e.Status, "text/xml;charset=UTF-8", fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>",
			xmlText(e.Code), xmlText(e.Message), id))
	case awsQuery:
		typ := "Sender"
		if e.Status >= 500 {
			typ = "Receiver"
		}
		send(w, e.Status, "text/xml", fmt.Sprintf("<ErrorResponse xmlns=%q><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>",
			services[c.service].xmlns, typ, xmlText(e.Code), xmlText(e.Message), id))
	default:
		if q := services[c.service].queryErrors[e.Code]; q != "" {
			w.Header().Set("X-Amzn-Query-Error", q+";Sender")
		}
		writeBareError(w, e.Status, e.Code, e.Message)
	}
}

func (s *Server) writeOutput(w http.ResponseWriter, c *call, out any) {
	id := s.nextRequestID()
	w.Header().Set("X-Amzn-RequestId", id)
	info := services[c.service]
	switch c.proto {
	case ec2Query, awsQuery:
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		fmt.Fprintf(&b, "<%sResponse xmlns=%q>", c.action, info.xmlns)
		enc := &xmlEncoder{b: &b, names: info.names, member: "member"}
		if c.proto == ec2Query {
			enc.member = "item"
			fmt.Fprintf(&b, "<requestId>%s</requestId>", id)
			enc.fields(reflect.ValueOf(out))
		} else {
			fmt.Fprintf(&b, "<%sResult>", c.action)
			enc.fields(reflect.ValueOf(out))
			fmt.Fprintf(&b, "</%sResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata>", c.action, id)
		}
		fmt.Fprintf(&b, "</%sResponse>", c.action)
		send(w, http.StatusOK, "text/xml;charset=UTF-8", b.String())
	default:
		body := []byte("{}")
		if sv, ok := out.(smithy.Serializable); ok && out != nil {
			js := newJSONSerializer()
			sv.Serialize(js)
			body = js.Bytes()
		}
		ct := "application/json"
		if c.proto == awsJSON10 {
			ct = "application/x-amz-json-1.0"
		} else if c.proto == awsJSON11 {
			ct = "application/x-amz-json-1.1"
		}
		send(w, http.StatusOK, ct, string(body))
	}
}

// send writes a response with its Content-Length, as AWS does: with a
// chunked body the SDK's decoder stops before the final chunk, the client
// closes the connection and the next request on it fails and is retried.
func send(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// xmlEncoder writes SDK structs (as generated for the ec2query and awsquery
// protocols) in the XML shape their deserializers read: one element per
// non-nil field named as in the names table or else after the Go field,
// lists wrapped in <member> or <item>, maps as <entry><key/><value/></entry>,
// timestamps in ISO 8601.
type xmlEncoder struct {
	b      *strings.Builder
	names  map[string]string
	member string
}

var timeType = reflect.TypeOf(time.Time{})

// fields writes the exported fields of the struct v (or *struct) without a
// wrapping element.
func (e *xmlEncoder) fields(v reflect.Value) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "ResultMetadata" {
			continue
		}
		name, ok := e.names[t.Name()+"."+f.Name]
		if !ok {
			name = f.Name
			if e.member == "item" { // ec2query names are lowerCamel
				name = strings.ToLower(name[:1]) + name[1:]
			}
		}
		if fv := v.Field(i); fv.Kind() == reflect.String && fv.String() == "" {
			continue // an unset enum
		}
		member, ok := e.names[t.Name()+"."+f.Name+"/member"]
		if !ok {
			member = e.member
		}
		e.value(name, member, v.Field(i))
	}
}

// value writes v as element name; list items are written as member.
func (e *xmlEncoder) value(name, member string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return
		}
		e.value(name, member, v.Elem())
		return
	case reflect.Struct:
		if v.Type() == timeType {
			e.leaf(name, v.Interface().(time.Time).UTC().Format("2006-01-02T15:04:05.000Z"))
			return
		}
		fmt.Fprintf(e.b, "<%s>", name)
		e.fields(v)
		fmt.Fprintf(e.b, "</%s>", name)
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			e.leaf(name, base64.StdEncoding.EncodeToString(v.Bytes()))
			return
		}
		fmt.Fprintf(e.b, "<%s>", name)
		for i := 0; i < v.Len(); i++ {
			e.value(member, e.member, v.Index(i))
		}
		fmt.Fprintf(e.b, "</%s>", name)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		fmt.Fprintf(e.b, "<%s>", name)
		for _, k := range keys {
			e.b.WriteString("<entry>")
			e.value("key", e.member, k)
			e.value("value", e.member, v.MapIndex(k))
			e.b.WriteString("</entry>")
		}
		fmt.Fprintf(e.b, "</%s>", name)
	case reflect.String:
		e.leaf(name, v.String())
	case reflect.Bool:
		e.leaf(name, strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.leaf(name, strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.leaf(name, strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		e.leaf(name, strconv.FormatFloat(v.Float(), 'f', -1, 64))
	}
}

func (e *xmlEncoder) leaf(name, text string) {
	fmt.Fprintf(e.b, "<%s>%s</%s>", name, xmlText(text), name)
}
