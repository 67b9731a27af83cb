module github.com/hookline/hookline/services/ingest

go 1.26.8
