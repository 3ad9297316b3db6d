package service

import (
	"strings"
	"testing"
)

// TestPrefixSnapshotsFollowConversations: a conversation holding a long
// document keeps snapshots on disk (Settings shows their space); a second
// conversation about the same document reads the shared prefix; deleting
// the first deletes the snapshots only it used and keeps the shared one;
// clearing deletes the rest.
func TestPrefixSnapshotsFollowConversations(t *testing.T) {
	svc := newTestService(t, mustDemo(t))
	if c := svc.ui.PrefixCache(); !c.Available || c.Snapshots != 0 || c.LimitBytes <= 0 {
		t.Fatalf("a new store: %+v", c)
	}
	doc := []byte(strings.Repeat("The harbour opens at six, the ferry leaves at seven and returns at noon. ", 120))
	ask := func(question string) (int64, int) {
		v := attachData(t, svc, "harbour.txt", doc)
		res, err := svc.ui.Send(SendRequest{Text: question, Attachments: []string{v.ID}})
		if err != nil {
			t.Fatal(err)
		}
		reply := waitReply(t, svc.Service, res.Reply.ID)
		if reply.Stats == nil {
			t.Fatalf("reply %+v has no stats", reply)
		}
		svc.prefix.Wait()
		return res.Conversation.ID, reply.Stats.CachedTokens
	}
	first, cached := ask("When does the ferry leave?")
	used := svc.ui.PrefixCache()
	if cached != 0 || used.Snapshots < 2 || used.Bytes <= 0 {
		t.Fatalf("after the first conversation: %d cached tokens, store %+v; want the documents' end and the answer's header kept", cached, used)
	}
	second, cached := ask("When does the harbour open?")
	if cached < 1000 {
		t.Fatalf("the second conversation about the same document read %d tokens from the cache, want the document's", cached)
	}
	both := svc.ui.PrefixCache()
	if err := svc.ui.Delete(first); err != nil {
		t.Fatal(err)
	}
	after := svc.ui.PrefixCache()
	if after.Snapshots >= both.Snapshots || after.Snapshots == 0 {
		t.Fatalf("deleting the first conversation left %d of %d snapshots; want its own gone and the shared one kept", after.Snapshots, both.Snapshots)
	}
	if err := svc.ui.Delete(second); err != nil {
		t.Fatal(err)
	}
	if c := svc.ui.PrefixCache(); c.Snapshots != 0 {
		t.Fatalf("with both conversations deleted %d snapshots remain", c.Snapshots)
	}
	ask("When does the ferry return?")
	if c, err := svc.ui.ClearPrefixCache(); err != nil || c.Snapshots != 0 || c.Bytes != 0 {
		t.Fatalf("after clearing: %+v, %v", c, err)
	}
	t.Logf("first %+v, both %+v, after deleting the first %+v", used, both, after)
}
