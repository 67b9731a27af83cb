package dev.hookline.examples;

import com.google.gson.Gson;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** One gRPC channel to Hookline's ingest, with the shared retry policy and the API key. */
final class HooklineChannel {
  private HooklineChannel() {}

  /**
   * A channel to addr whose calls retry by the policy in service-config.json (the file every
   * example shares, on the classpath): UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED
   * only, at most 5 attempts inside a 20 s deadline, exponential backoff with full jitter, a
   * server's grpc-retry-pushback-ms honoured. A retry resends the same request, so one
   * idempotency key is what every try carries.
   */
  static ManagedChannel open(String addr) throws IOException {
    return ManagedChannelBuilder.forTarget(addr)
        .usePlaintext()
        .defaultServiceConfig(serviceConfig())
        .enableRetry()
        .build();
  }

  /** The interceptor that sends "authorization: Bearer KEY" on every call. */
  static ClientInterceptor auth(String apiKey) {
    Metadata md = new Metadata();
    md.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + apiKey);
    return MetadataUtils.newAttachHeadersInterceptor(md);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, ?> serviceConfig() throws IOException {
    try (InputStream in = HooklineChannel.class.getResourceAsStream("/service-config.json")) {
      if (in == null) {
        throw new IOException("service-config.json is not on the classpath");
      }
      // Gson reads JSON numbers as Double, the type grpc-java's service config expects.
      try (Reader r = new InputStreamReader(in, StandardCharsets.UTF_8)) {
        return new Gson().fromJson(r, Map.class);
      }
    }
  }

  /** An environment variable, or def when it is unset or empty. */
  static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? def : v;
  }
}
