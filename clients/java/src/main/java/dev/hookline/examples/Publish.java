package dev.hookline.examples;

import com.google.protobuf.ByteString;
import hookline.v1.Delivery.DeliveryStatus;
import hookline.v1.Delivery.GetDeliveryRequest;
import hookline.v1.DeliveryServiceGrpc;
import hookline.v1.EndpointOuterClass.CreateEndpointRequest;
import hookline.v1.EndpointOuterClass.Endpoint;
import hookline.v1.EndpointServiceGrpc;
import hookline.v1.Event.PublishEventRequest;
import hookline.v1.Event.PublishEventResponse;
import hookline.v1.EventServiceGrpc;
import hookline.v1.Records.DeliveryState;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * Create an endpoint, publish one event to it and follow its delivery.
 *
 * <p>Environment: HOOKLINE_ADDR (default 127.0.0.1:7070), HOOKLINE_API_KEY (required),
 * HOOKLINE_RECEIVER_URL (default http://127.0.0.1:9000/webhooks), HOOKLINE_WAIT_SECONDS (default
 * 60).
 */
public final class Publish {
  static final Set<DeliveryState> TERMINAL =
      Set.of(
          DeliveryState.DELIVERY_STATE_DELIVERED,
          DeliveryState.DELIVERY_STATE_FAILED,
          DeliveryState.DELIVERY_STATE_EXPIRED,
          DeliveryState.DELIVERY_STATE_ENDPOINT_DELETED);

  private Publish() {}

  public static void main(String[] args) throws Exception {
    String apiKey = HooklineChannel.env("HOOKLINE_API_KEY", "");
    if (apiKey.isEmpty()) {
      System.err.println("set HOOKLINE_API_KEY (make run prints one)");
      System.exit(2);
    }
    ManagedChannel channel = HooklineChannel.open(HooklineChannel.env("HOOKLINE_ADDR", "127.0.0.1:7070"));
    try {
      System.exit(run(channel, HooklineChannel.auth(apiKey)));
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  static int run(ManagedChannel channel, ClientInterceptor auth) throws InterruptedException {
    String receiver = HooklineChannel.env("HOOKLINE_RECEIVER_URL", "http://127.0.0.1:9000/webhooks");
    long waitMillis = (long) (1000 * Double.parseDouble(HooklineChannel.env("HOOKLINE_WAIT_SECONDS", "60")));
    var endpoints = EndpointServiceGrpc.newBlockingStub(channel).withInterceptors(auth);
    var events = EventServiceGrpc.newBlockingStub(channel).withInterceptors(auth);
    var deliveries = DeliveryServiceGrpc.newBlockingStub(channel).withInterceptors(auth);

    Endpoint ep =
        endpoints
            .withDeadlineAfter(10, TimeUnit.SECONDS)
            .createEndpoint(
                CreateEndpointRequest.newBuilder().setUrl(receiver).setDescription("java example").build())
            .getEndpoint();
    System.out.println("endpoint " + ep.getId() + " created for " + ep.getUrl());

    // One key per logical publish, made before the first try.
    String key = UUID.randomUUID().toString();
    PublishEventResponse published =
        events.publishEvent(
            PublishEventRequest.newBuilder()
                .setEventType("example.java")
                .setPayload(
                    ByteString.copyFrom(
                        "{\"language\":\"java\",\"key\":\"" + key + "\"}", StandardCharsets.UTF_8))
                .setIdempotencyKey(key)
                .addEndpointIds(ep.getId())
                .build());
    System.out.println("event " + published.getEventId() + " published with idempotency key " + key);

    String deliveryId = published.getDeliveries(0).getDeliveryId();
    long deadline = System.currentTimeMillis() + waitMillis;
    DeliveryState last = null;
    while (true) {
      DeliveryStatus status =
          deliveries
              .getDelivery(GetDeliveryRequest.newBuilder().setDeliveryId(deliveryId).build())
              .getDelivery();
      if (status.getState() != last) {
        System.out.println(
            "delivery " + deliveryId + " " + status.getState() + " attempts=" + status.getAttempts());
        last = status.getState();
      }
      if (TERMINAL.contains(status.getState())) {
        return status.getState() == DeliveryState.DELIVERY_STATE_DELIVERED ? 0 : 1;
      }
      if (System.currentTimeMillis() > deadline) {
        System.err.println("delivery " + deliveryId + " still " + status.getState() + " after " + waitMillis / 1000 + " s");
        return 1;
      }
      Thread.sleep(200);
    }
  }
}
