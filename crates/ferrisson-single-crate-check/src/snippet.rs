use ferrisson_semaphore::{Client, ClientConfig, Semaphore};

pub async fn call_partner(url: &str) -> ferrisson_semaphore::Result<()> {
    let client = Client::with_config(ClientConfig::new(url)).await?;
    let limit = Semaphore::new(&client, "partner-api")?;
    limit.try_set_permits(20).await?; // the first instance to start sets the limit
    let permit = limit.acquire().await?; // waits while 20 calls are in flight
    // ... call the partner API ...
    permit.release().await?;
    client.shutdown().await
}
