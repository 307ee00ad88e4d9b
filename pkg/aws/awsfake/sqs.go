package awsfake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// SQSState is the SQS part of an account.
type SQSState struct {
	Queues []SQSQueue `json:"queues,omitempty"`
}

// SQSQueue is a queue with its attributes (MessageRetentionPeriod, Policy,
// SqsManagedSseEnabled, ...) and tags.
type SQSQueue struct {
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// registerSQS adds SQS (awsJson1_0): the queue management operations.
func registerSQS(s *Server) {
	s.register("sqs", "GetQueueUrl", sqsGetQueueURL)
	s.register("sqs", "CreateQueue", sqsCreateQueue)
	s.register("sqs", "GetQueueAttributes", sqsGetQueueAttributes)
	s.register("sqs", "SetQueueAttributes", sqsSetQueueAttributes)
	s.register("sqs", "ListQueueTags", sqsListQueueTags)
	s.register("sqs", "TagQueue", sqsTagQueue)
	s.register("sqs", "DeleteQueue", sqsDeleteQueue)
}

func (c *call) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", c.acct.Region, c.acct.ID, name)
}

func noSuchQueue() *Error {
	return errorf(http.StatusBadRequest, "QueueDoesNotExist", "The specified queue does not exist.")
}

func (c *call) queueByURL(url *string) (*SQSQueue, error) {
	if url == nil {
		return nil, c.missingParam("QueueUrl")
	}
	for i := range c.acct.SQS.Queues {
		if c.queueURL(c.acct.SQS.Queues[i].Name) == *url {
			return &c.acct.SQS.Queues[i], nil
		}
	}
	return nil, noSuchQueue()
}

func sqsGetQueueURL(c *call) (any, error) {
	var in sqs.GetQueueUrlInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	for _, q := range c.acct.SQS.Queues {
		if q.Name == deref(in.QueueName) {
			return &sqs.GetQueueUrlOutput{QueueUrl: ptr(c.queueURL(q.Name))}, nil
		}
	}
	return nil, noSuchQueue()
}

func sqsCreateQueue(c *call) (any, error) {
	var in sqs.CreateQueueInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	name := deref(in.QueueName)
	if name == "" || len(name) > 80 {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	for _, q := range c.acct.SQS.Queues {
		if q.Name != name {
			continue
		}
		// CreateQueue is idempotent for identical attributes.
		for k, v := range in.Attributes {
			if q.Attributes[k] != v {
				return nil, errorf(http.StatusBadRequest, "QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return &sqs.CreateQueueOutput{QueueUrl: ptr(c.queueURL(name))}, nil
	}
	attrs := maps.Clone(in.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	attrs["QueueArn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", c.acct.Region, c.acct.ID, name)
	c.acct.SQS.Queues = append(c.acct.SQS.Queues, SQSQueue{Name: name, Attributes: attrs, Tags: maps.Clone(in.Tags)})
	return &sqs.CreateQueueOutput{QueueUrl: ptr(c.queueURL(name))}, nil
}

func sqsGetQueueAttributes(c *call) (any, error) {
	var in sqs.GetQueueAttributesInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	q, err := c.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range q.Attributes {
		for _, want := range in.AttributeNames {
			if string(want) == "All" || string(want) == k {
				out[k] = v
			}
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

func sqsSetQueueAttributes(c *call) (any, error) {
	var in sqs.SetQueueAttributesInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	q, err := c.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	maps.Copy(q.Attributes, in.Attributes)
	return &sqs.SetQueueAttributesOutput{}, nil
}

func sqsListQueueTags(c *call) (any, error) {
	var in sqs.ListQueueTagsInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	q, err := c.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.ListQueueTagsOutput{Tags: maps.Clone(q.Tags)}, nil
}

func sqsTagQueue(c *call) (any, error) {
	var in sqs.TagQueueInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	q, err := c.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if q.Tags == nil {
		q.Tags = map[string]string{}
	}
	maps.Copy(q.Tags, in.Tags)
	return &sqs.TagQueueOutput{}, nil
}

func sqsDeleteQueue(c *call) (any, error) {
	var in sqs.DeleteQueueInput
	if err := c.decodeJSON(&in); err != nil {
		return nil, err
	}
	q, err := c.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	name := q.Name
	c.acct.SQS.Queues = slices.DeleteFunc(c.acct.SQS.Queues, func(x SQSQueue) bool { return x.Name == name })
	return &sqs.DeleteQueueOutput{}, nil
}
