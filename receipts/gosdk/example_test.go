package receiptsgosdk_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient/receipts"
	receiptsgosdk "github.com/northstar-mcp/mcpclient/receipts/gosdk"
)

// A go-sdk server run over stdio, keeping receipts for the requests that opt in.
func ExampleTransport() {
	server := mcp.NewServer(&mcp.Implementation{Name: "booking", Version: "1.0.0"}, nil)
	// mcp.AddTool(server, ...)
	if err := server.Run(context.Background(), receiptsgosdk.Transport(&mcp.StdioTransport{}, receipts.Options{})); err != nil {
		log.Fatal(err)
	}
}

// One Adapter serves connection after connection (here over in-process pipes, as over a
// socket): a tool call resent under its id on a new connection is answered from its receipt,
// and the tool runs once.
func ExampleAdapter() {
	runs := 0
	server := mcp.NewServer(&mcp.Implementation{Name: "booking", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "charge"}, func(ctx context.Context, _ *mcp.CallToolRequest, args struct{ Cents int }) (*mcp.CallToolResult, any, error) {
		runs++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("charged %d", args.Cents)}}}, nil, nil
	})
	adapter := receiptsgosdk.New(receipts.Options{})

	const (
		initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}},"clientInfo":{"name":"c","version":"1"}}}`
		call       = `{"jsonrpc":"2.0","id":"6f1c","method":"tools/call","params":{"name":"charge","arguments":{"Cents":500}}}`
	)
	for range 2 {
		client, serverEnd := net.Pipe()
		session, err := server.Connect(context.Background(), adapter.Transport(&mcp.IOTransport{Reader: serverEnd, Writer: serverEnd}), nil)
		if err != nil {
			log.Fatal(err)
		}
		r := bufio.NewReader(client)
		fmt.Fprintln(client, initialize)
		r.ReadString('\n')
		fmt.Fprintln(client, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		fmt.Fprintln(client, call)
		answer, _ := r.ReadString('\n')
		fmt.Println(strings.Contains(answer, receipts.ReplayMetaKey), strings.Contains(answer, "charged 500"))
		client.Close()
		session.Wait()
	}
	fmt.Println("runs:", runs)
	// Output:
	// false true
	// true true
	// runs: 1
}
