module github.com/hookline/hookline/sdk

go 1.26.8

require (
	github.com/hookline/hookline/gen v0.0.0
	github.com/hookline/hookline/platform v0.0.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/hookline/hookline/gen => ../gen

replace github.com/hookline/hookline/platform => ../platform
