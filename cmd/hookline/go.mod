module github.com/hookline/hookline/cmd/hookline

go 1.26.8
